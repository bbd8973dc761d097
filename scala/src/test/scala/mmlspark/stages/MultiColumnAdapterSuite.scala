package mmlspark.stages

import mmlspark.contracts.{EstimatorSuite, TestObject}
import org.apache.spark.ml.PipelineModel
import org.apache.spark.ml.feature.{Binarizer, StringIndexer, StringIndexerModel, VectorAssembler}

class MultiColumnAdapterSuite extends EstimatorSuite[MultiColumnAdapter, PipelineModel] {

  private def indexer = new StringIndexer().setStringOrderType("alphabetAsc")

  /** Spark's StringIndexer reads a dotted name as a nested field: the names without a dot. */
  private def people = Fixtures.people.withColumnRenamed("a.b", "name")

  override def testObjects: Seq[TestObject[MultiColumnAdapter]] = Seq(
    TestObject(
      new MultiColumnAdapter()
        .setBaseStage(indexer)
        .setInputCols(Array("key", "name"))
        .setOutputCols(Array("key_i", "name_i")),
      people,
      out => {
        // Alphabetical levels, worked out apart from Spark: k0 < k1 < k2, "name10" < "name2".
        val names = (0 until 20).map(i => s"name$i").sorted
        val got = out.select("id", "key_i", "name_i").collect()
        assert(got.length == 20)
        got.foreach { r =>
          val id = r.getLong(0).toInt
          assert(r.getDouble(1) == (id % 3).toDouble)
          assert(r.getDouble(2) == names.indexOf(s"name$id").toDouble)
        }
      }
    )
  )

  test("the fitted model has one fitted copy per pair; the base stage is left as it was") {
    val base = indexer
    val model = new MultiColumnAdapter()
      .setBaseStage(base)
      .setInputCols(Array("key", "name"))
      .setOutputCols(Array("key_i", "name_i"))
      .fit(people)
    val fitted = model.stages.map(_.asInstanceOf[StringIndexerModel])
    assert(
      fitted.map(m => (m.getInputCol, m.getOutputCol)).toSeq == Seq(
        "key" -> "key_i",
        "name" -> "name_i"
      )
    )
    assert(fitted.head.labelsArray.head.toSeq == Seq("k0", "k1", "k2"))
    assert(!base.isSet(base.inputCol) && !base.isSet(base.outputCol))
  }

  test("a Transformer as the base stage: each copy transforms its own column") {
    val input = people.withColumn("count", org.apache.spark.sql.functions.col("id").cast("double"))
    val model = new MultiColumnAdapter()
      .setBaseStage(new Binarizer().setThreshold(4.0))
      .setInputCols(Array("score", "count"))
      .setOutputCols(Array("high", "many"))
      .fit(input)
    model.transform(input).select("id", "high", "many").collect().foreach { r =>
      val id = r.getLong(0)
      assert(r.getDouble(1) == (if (id * 0.5 > 4.0) 1.0 else 0.0))
      assert(r.getDouble(2) == (if (id > 4) 1.0 else 0.0))
    }
  }

  test("misuse fails before any job, naming the stage and what is wrong") {
    def failure(stage: MultiColumnAdapter): String =
      intercept[IllegalArgumentException](stage.fit(people)).getMessage
    val two = new MultiColumnAdapter().setInputCols(Array("key", "name"))
    assert(
      failure(two.copy(org.apache.spark.ml.param.ParamMap.empty))
        .contains("'baseStage' must be set")
    )
    val counts = two.setBaseStage(indexer).setOutputCols(Array("k"))
    assert(failure(counts).contains("2 inputCols but 1 outputCols"))
    val assembler = new MultiColumnAdapter()
      .setBaseStage(new VectorAssembler())
      .setInputCols(Array("score"))
      .setOutputCols(Array("v"))
    assert(failure(assembler).contains("must have the params inputCol and outputCol"))
    val onto = new MultiColumnAdapter()
      .setBaseStage(indexer)
      .setInputCols(Array("key"))
      .setOutputCols(Array("score"))
    assert(failure(onto).contains("output column 'score' already exists"))
    val missing = onto
      .copy(org.apache.spark.ml.param.ParamMap.empty)
      .setInputCols(Array("nope"))
      .setOutputCols(Array("x"))
    assert(failure(missing).contains("'nope' does not exist"))
  }
}
