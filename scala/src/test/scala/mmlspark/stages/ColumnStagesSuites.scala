package mmlspark.stages

import mmlspark.contracts.{SparkTestSession, StageChecks, TestObject, TransformerSuite}
import org.apache.spark.sql.DataFrame

object Fixtures {
  import SparkTestSession.spark.implicits._

  /** 20 rows: id 0..19, a key, a double and a string (with a dotted column name). */
  def people: DataFrame =
    (0 until 20)
      .map(i => (i.toLong, s"k${i % 3}", i * 0.5, s"name$i"))
      .toDF("id", "key", "score", "a.b")
}

class SelectColumnsSuite extends TransformerSuite[SelectColumns] {
  override def testObjects: Seq[TestObject[SelectColumns]] = Seq(
    TestObject(
      new SelectColumns().setCols(Array("score", "a.b")),
      Fixtures.people,
      out => {
        assert(out.columns.toSeq == Seq("score", "a.b"))
        assert(
          out.collect().map(r => (r.getDouble(0), r.getString(1))).toSet ==
            (0 until 20).map(i => (i * 0.5, s"name$i")).toSet
        )
      }
    )
  )

  test(
    "a missing column fails in transformSchema, naming stage, column and the columns there are"
  ) {
    val stage = new SelectColumns().setCols(Array("id", "nope"))
    val error = intercept[IllegalArgumentException](stage.transformSchema(Fixtures.people.schema))
    assert(error.getMessage.contains(stage.uid) && error.getMessage.contains("'nope'"))
    assert(error.getMessage.contains("[id, key, score, a.b]"))
  }

  test("repeated or empty column lists fail when set") {
    intercept[IllegalArgumentException](new SelectColumns().setCols(Array("a", "a")))
    intercept[IllegalArgumentException](new SelectColumns().setCols(Array.empty[String]))
  }
}

class DropColumnsSuite extends TransformerSuite[DropColumns] {
  override def testObjects: Seq[TestObject[DropColumns]] = Seq(
    TestObject(
      new DropColumns().setCols(Array("key", "a.b")),
      Fixtures.people,
      out => {
        assert(out.columns.toSeq == Seq("id", "score"))
        assert(out.count() == 20)
      }
    )
  )

  test("an empty list drops nothing, as in SynapseML; SelectColumns still needs a column") {
    val out = new DropColumns().setCols(Array.empty[String]).transform(Fixtures.people)
    assert(out.columns.toSeq == Fixtures.people.columns.toSeq && out.count() == 20)
    intercept[IllegalArgumentException](new SelectColumns().setCols(Array.empty[String]))
    intercept[IllegalArgumentException](new DropColumns().setCols(Array("id", "id")))
  }

  test("a name that is no column is passed over, as Spark's drop and SynapseML's DropColumns do") {
    val stage = new DropColumns().setCols(Array("x", "key"))
    assert(
      stage.transformSchema(Fixtures.people.schema).fieldNames.toSeq == Seq("id", "score", "a.b")
    )
    assert(stage.transform(Fixtures.people).columns.toSeq == Seq("id", "score", "a.b"))
    val error = intercept[IllegalArgumentException](new DropColumns().transform(Fixtures.people))
    assert(error.getMessage.contains("param 'cols' must be set"))
  }
}

class RenameColumnSuite extends TransformerSuite[RenameColumn] {
  override def testObjects: Seq[TestObject[RenameColumn]] = Seq(
    TestObject(
      new RenameColumn().setInputCol("a.b").setOutputCol("name"),
      Fixtures.people,
      out => {
        assert(out.columns.toSeq == Seq("id", "key", "score", "name"))
        assert(
          out.select("name").collect().map(_.getString(0)).toSet == (0 until 20)
            .map(i => s"name$i")
            .toSet
        )
      }
    )
  )

  test("renaming onto an existing column fails in transformSchema") {
    val stage = new RenameColumn().setInputCol("id").setOutputCol("key")
    val error = intercept[IllegalArgumentException](stage.transformSchema(Fixtures.people.schema))
    assert(error.getMessage.contains("output column 'key' already exists"))
  }

  test("renaming a column to its own name changes nothing; a missing input column fails") {
    val same = new RenameColumn().setInputCol("key").setOutputCol("key")
    StageChecks.assertSameRows(Fixtures.people, same.transform(Fixtures.people))
    val error = intercept[IllegalArgumentException](
      new RenameColumn().setInputCol("nope").setOutputCol("x").transform(Fixtures.people)
    )
    assert(error.getMessage.contains("'nope' does not exist"))
  }
}

class RepartitionSuite extends TransformerSuite[Repartition] {
  override def testObjects: Seq[TestObject[Repartition]] = Seq(
    TestObject(new Repartition().setN(3), Fixtures.people, out => assert(out.count() == 20)),
    TestObject(
      new Repartition().setN(3).setDisable(true),
      Fixtures.people,
      out => assert(out.count() == 20)
    )
  )

  test("n sets the number of partitions; disable keeps the input's") {
    val input = Fixtures.people.coalesce(1)
    assert(new Repartition().setN(5).transform(input).rdd.getNumPartitions == 5)
    assert(new Repartition().setN(5).setDisable(true).transform(input).rdd.getNumPartitions == 1)
    StageChecks.assertSameRows(input, new Repartition().setN(5).transform(input))
  }

  test("n below 1 fails when set") {
    intercept[IllegalArgumentException](new Repartition().setN(0))
  }
}

class CacherSuite extends TransformerSuite[Cacher] {
  override def testObjects: Seq[TestObject[Cacher]] = Seq(
    TestObject(new Cacher(), Fixtures.people, out => assert(out.count() == 20))
  )

  test("caches unless disabled") {
    val input = Fixtures.people
    assert(new Cacher().transform(input).storageLevel.useMemory)
    assert(!new Cacher().setDisable(true).transform(input.select("id")).storageLevel.useMemory)
  }
}
