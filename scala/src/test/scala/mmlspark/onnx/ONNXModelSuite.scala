package mmlspark.onnx

import java.nio.file.{Files, Paths}

import mmlspark.contracts.{SparkTestSession, StageChecks, TestObject, TransformerSuite}
import org.apache.spark.ml.linalg.{SQLDataTypes, Vector, Vectors}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.scheduler.{SparkListener, SparkListenerJobStart}
import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.types.{ArrayType, BinaryType, FloatType}

object OnnxFixtures {

  /** A model written by tests/onnx_models.py (see SCALA_FIXTURES there). */
  def path(name: String): String = Paths.get(getClass.getResource(s"/onnx/$name").toURI).toString

  def bytes(name: String): Array[Byte] = Files.readAllBytes(Paths.get(path(name)))

  lazy val pairs: DataFrame = {
    val spark = SparkTestSession.spark
    import spark.implicits._
    Seq[(Long, Array[Float], Array[Float])](
      (1L, Array(1f, 2f, 3f), Array(0.5f, 0.25f, 2f)),
      (2L, Array(-1f, 0f, 4f), Array(2f, 2f, 2f)),
      (3L, null, Array(1f, 1f, 1f)),
      (4L, Array(1f, 2f), Array(1f, 1f, 1f)),
      (5L, Array(0.1f, 0.2f, 0.3f), Array(3f, -3f, 0.7f))
    ).toDF("id", "a", "b").repartition(2)
  }

  def byId(df: DataFrame): Map[Long, Row] = df.collect().map(r => r.getAs[Long]("id") -> r).toMap

  def floats(row: Row, column: String): Seq[Float] = row.getSeq[Float](row.fieldIndex(column))
}

class ONNXModelSuite extends TransformerSuite[ONNXModel] {
  import OnnxFixtures._

  private def pairModel = new ONNXModel()
    .setModelLocation(path("two_in_two_out.onnx"))
    .setFeedDict(Map("a" -> "a", "b" -> "b"))
    .setFetchDict(Map("sum" -> "sum", "product" -> "product", "total" -> "total"))
    .setMiniBatchSize(2)

  private def checkPairs(out: DataFrame): Unit = {
    val rows = byId(out)
    assert(rows.size == 5)
    for (id <- Seq(1L, 2L, 5L)) {
      val r = rows(id)
      val (a, b) = (floats(r, "a"), floats(r, "b"))
      assert(floats(r, "sum") == a.zip(b).map { case (x, y) => x + y })
      assert(floats(r, "product") == a.zip(b).map { case (x, y) => x * y })
      assert(math.abs(r.getAs[Float]("total") - a.sum) < 1e-6)
      assert(r.isNullAt(r.fieldIndex("onnxError")))
    }
    assert(rows(3).getAs[String]("onnxError") == "input column 'a' is null")
    assert(rows(4).getAs[String]("onnxError").contains("holds 2 values"))
    for (id <- Seq(3L, 4L)) assert(rows(id).isNullAt(rows(id).fieldIndex("sum")))
  }

  override def testObjects: Seq[TestObject[ONNXModel]] = Seq(
    TestObject(pairModel, pairs, checkPairs),
    TestObject(
      new ONNXModel()
        .setModelPayload(bytes("fixed_batch.onnx"))
        .setInputCol("x")
        .setOutputCol("y"), {
        val spark = SparkTestSession.spark
        import spark.implicits._
        Seq((1L, Array(1.0, 2.0, 3.0, 4.0)), (2L, Array(-0.5, 0.0, 0.25, 1e6))).toDF("id", "x")
      },
      out => {
        val rows = byId(out)
        for (r <- rows.values) {
          val x = r.getSeq[Double](r.fieldIndex("x"))
          assert(floats(r, "y") == x.map(v => 2 * v.toFloat + 1))
        }
      }
    )
  )

  test("outputs of a declared shape are written into reused buffers, with the same values") {
    val spark = SparkTestSession.spark
    val rows = {
      import spark.implicits._
      (1L to 40L)
        .map(i => (i, Array(i.toFloat, -i.toFloat, 0.5f), Array(2f, 3f, i.toFloat)))
        .toDF("id", "a", "b")
        .repartition(1)
    }
    def check(out: Map[Long, Row]): Unit = for ((id, r) <- out) {
      val (a, b) = (floats(r, "a"), floats(r, "b"))
      assert(floats(r, "sum") == a.zip(b).map { case (x, y) => x + y }, id)
      assert(floats(r, "product") == a.zip(b).map { case (x, y) => x * y }, id)
      assert(math.abs(r.getAs[Float]("total") - a.sum) < 1e-4, id)
    }
    def pinnedRunsOf(pinOutputs: Option[String]): Long = {
      pinOutputs.foreach(spark.conf.set(ServiceSettings.PinOutputsKey, _))
      try {
        val before = OutputBuffers.pinnedRuns.get()
        check(byId(pairModel.transform(rows)))
        OutputBuffers.pinnedRuns.get() - before
      } finally spark.conf.unset(ServiceSettings.PinOutputsKey)
    }
    // pinOutputs on: 20 runs of 2 rows; the first shows the outputs' shapes, the later ones are
    // pinned.
    assert(pinnedRunsOf(Some("true")) >= 10)
    // Off, and by default on a CPU (auto), ONNX Runtime allocates every run's outputs: none is
    // pinned.
    assert(pinnedRunsOf(Some("false")) == 0)
    assert(pinnedRunsOf(None) == 0)
  }

  test("the CUDA provider's options come from ONNXModel's params, the memory limit only over 0") {
    val stage = new ONNXModel()
    CudaOptions.fromSettings.foreach(f => assert(stage.hasParam(f.setting), f.setting))
    val values = Map[String, Any]("cudnnConvAlgoSearch" -> "HEURISTIC", "cudaMemoryLimit" -> 0L)
    assert(
      CudaOptions.of(values) == Seq(
        "cudnn_conv_algo_search" -> "HEURISTIC",
        "arena_extend_strategy" -> "kSameAsRequested"
      )
    )
    assert(
      CudaOptions.of(values + ("cudaMemoryLimit" -> (1L << 33))).toMap ==
        Map(
          "cudnn_conv_algo_search" -> "HEURISTIC",
          "gpu_mem_limit" -> "8589934592",
          "arena_extend_strategy" -> "kSameAsRequested"
        )
    )
  }

  test("softmax and argmax of a fetched column, vectors in and out") {
    val spark = SparkTestSession.spark
    import spark.implicits._
    val df = Seq(
      (1L, Vectors.dense(1, 2, 3), Vectors.dense(0.5, -4, 1)),
      (2L, Vectors.sparse(3, Array(1), Array(7.0)), Vectors.dense(0, 0, 0))
    ).toDF("id", "a", "b")
    val out = pairModel
      .setFetchDict(Map("sum" -> "sum"))
      .setVectorOutputs(true)
      .setSoftMaxDict(Map("sum" -> "probability"))
      .setArgMaxDict(Map("sum" -> "prediction"))
      .transform(df)
    for (r <- out.collect()) {
      val a = r.getAs[Vector]("a").toArray
      val b = r.getAs[Vector]("b").toArray
      val sum = a.zip(b).map { case (x, y) => (x.toFloat + y.toFloat).toDouble }
      assert(r.getAs[Vector]("sum").toArray.toSeq == sum.toSeq)
      val e = sum.map(v => math.exp(v - sum.max))
      val expected = e.map(_ / e.sum)
      r.getAs[Vector]("probability").toArray.zip(expected).foreach { case (p, q) =>
        assert(math.abs(p - q) < 1e-12)
      }
      assert(r.getAs[Double]("prediction") == sum.indexOf(sum.max).toDouble)
    }
  }

  test(
    "the softmax of a one-dimensional output is a vector by default; stages saved before keep arrays"
  ) {
    val spark = SparkTestSession.spark
    import spark.implicits._
    val df = Seq((1L, Array(1f, 2f, 3f), Array(0.5f, -4f, 1f))).toDF("id", "a", "b")
    val model = pairModel
      .setFetchDict(Map("sum" -> "sum"))
      .setSoftMaxDict(Map("sum" -> "probability"))
    val out = model.transform(df)
    assert(out.schema("sum").dataType == ArrayType(FloatType, containsNull = false))
    assert(out.schema("probability").dataType == SQLDataTypes.VectorType)
    val sum = Seq(1.5, -2.0, 4.0)
    val e = sum.map(v => math.exp(v - sum.max))
    out.first().getAs[Vector]("probability").toArray.zip(e.map(_ / e.sum)).foreach { case (p, q) =>
      assert(math.abs(p - q) < 1e-7)
    }
    val asFetched = model.copy(ParamMap.empty).setSoftMaxVectors(false).transform(df)
    assert(asFetched.schema("probability").dataType == ArrayType(FloatType, containsNull = false))
    // Saved without the param (as before it existed): loads giving arrays, as it did.
    val dir = StageChecks.savedWithout(model, Set("softMaxVectors"), "softmax-old")
    val loaded = ONNXModel.load(dir)
    assert(!loaded.getSoftMaxVectors)
    assert(
      loaded.transform(df).schema("probability").dataType == ArrayType(
        FloatType,
        containsNull = false
      )
    )
  }

  test("ONNX Runtime's copies of its native libraries leave the temporary folder once loaded") {
    OrtSessions.environment
    assert(!OrtNative.carriesLazyProviders, "the CPU build of ONNX Runtime is the one tested here")
    // ONNX Runtime Java copied them into a folder of java.io.tmpdir and would keep it to the end.
    // (Its path is the loader's own field: other JVMs' folders may be there too.)
    val copied = OrtNative.extractedPath
    assert(copied.nonEmpty, "ONNX Runtime Java no longer says where it copied its libraries")
    assert(!copied.get.toFile.exists(), copied)
  }

  test("one session per model content, device and settings in a JVM; idle sessions close") {
    OrtSessions.closeIdle(0)
    val before = OrtSessions.created
    val model = pairModel.setModelPayload(bytes("two_in_two_out.onnx"))
    model.transform(pairs).collect()
    model.transform(pairs).collect()
    // The same bytes from a file: same content, same session.
    pairModel.transform(pairs).collect()
    assert(OrtSessions.created - before == 1)
    assert(OrtSessions.openKeys.count(_.modelHash == model.modelInfo.source.hash) == 1)
    assert(OrtSessions.closeIdle(0) >= 1)
    assert(!OrtSessions.openKeys.exists(_.modelHash == model.modelInfo.source.hash))
    pairModel.setIntraOpThreads(2).transform(pairs).collect()
    assert(OrtSessions.created - before == 2)
  }

  test("inputs and outputs are read from the model, with dynamic dimensions") {
    val model = new ONNXModel().setModelPayload(bytes("small_cnn.onnx"))
    val input = model.getModelInputs.head
    assert(input.name == "image" && input.typeName == "float")
    assert(input.shape == Seq(-1L, 3L, -1L, -1L))
    assert(input.dimNames == Seq("N", "", "H", "W"))
    assert(model.getModelOutputs.map(o => (o.name, o.shape)) == Seq(("logits", Seq(-1L, 5L))))
    assert(model.getModelInputsJson.contains("\"shape\":[-1,3,-1,-1]"))
  }

  test("misconfiguration fails in transformSchema, naming stage, column and model input") {
    val jobs = new java.util.concurrent.atomic.AtomicInteger()
    val listener = new SparkListener {
      override def onJobStart(e: SparkListenerJobStart): Unit = jobs.incrementAndGet()
    }
    spark.sparkContext.addSparkListener(listener)
    try {
      val unknown = intercept[IllegalArgumentException](
        pairModel.setFeedDict(Map("a" -> "a", "c" -> "b")).transform(pairs)
      )
      assert(unknown.getMessage.contains("model input 'c'"))
      assert(unknown.getMessage.contains("'a' (float[?, 3])"))
      val unfed =
        intercept[IllegalArgumentException](pairModel.setFeedDict(Map("a" -> "a")).transform(pairs))
      assert(unfed.getMessage.contains("'b' (float[?, 3]) are not fed"))
      val stringColumn = intercept[IllegalArgumentException](
        pairModel.transform(pairs.selectExpr("id", "a", "cast(id as string) as b"))
      )
      assert(stringColumn.getMessage.contains("input column 'b' must be a numeric column"))
      assert(stringColumn.getMessage.contains("but was string"))
      val corrupt = Paths.get(SparkTestSession.tempDir("corrupt"), "corrupt.onnx")
      Files.write(corrupt, Array[Byte](1, 2, 3, 4, 5))
      def failure(location: String, outputCol: Option[String]): String = {
        val stage = new ONNXModel().setModelLocation(location).setInputCol("a")
        outputCol.foreach(stage.setOutputCol)
        intercept[IllegalArgumentException](stage.transform(pairs)).getMessage
      }
      assert(failure(corrupt.toString, Some("o")).contains("is not a model ONNX Runtime"))
      assert(
        failure("/nonexistent/m.onnx", Some("o"))
          .contains("cannot read the model at '/nonexistent/m.onnx'")
      )
      assert(failure(path("two_in_two_out.onnx"), None).contains("the model has 2 inputs"))
      intercept[IllegalArgumentException](new ONNXModel().setFeedDict("[1, 2]"))
      intercept[IllegalArgumentException](new ONNXModel().setDeviceType("tpu"))
      intercept[IllegalArgumentException](new ONNXModel().setOptimizationLevel("most"))
      // Listener events arrive in order: once this job's start is seen, any earlier job's was too.
      spark.range(1).collect()
      val deadline = System.currentTimeMillis() + 10000
      while (jobs.get() == 0 && System.currentTimeMillis() < deadline) Thread.sleep(10)
      assert(jobs.get() == 1, "a misconfigured stage started a Spark job")
    } finally spark.sparkContext.removeSparkListener(listener)
  }

  test("deviceType cuda without the CUDA provider is a clear error; auto falls back to CPU") {
    assert(Device.select("auto", Seq("3"), cudaAvailable = false) == Cpu)
    assert(Device.select("cuda", Seq("3", "5"), cudaAvailable = true) == Cuda(3))
    assert(Device.select("auto", Nil, cudaAvailable = true) == Cuda(0))
    val error =
      intercept[IllegalStateException](Device.select("cuda", Seq("0"), cudaAvailable = false))
    assert(error.getMessage.contains("no CUDA provider"))
    if (!Device.cudaAvailable) {
      val job = intercept[Exception](pairModel.setDeviceType("cuda").transform(pairs).collect())
      assert(job.getMessage.contains("no CUDA provider"))
    }
  }

  test("input buffers hold the rows of the batch; an input too large says what and the limit") {
    val spec = TensorSpec("x", Some(ElementType.Float32), "float", Seq(-1L, 3L, -1L, -1L), Nil)
    val feed = Feed(spec, ElementType.Float32, "x", 0, BinaryType, Seq(3L, -1L, -1L))
    val batch = new TensorBatch(Seq(feed))
    val rowBytes = 3L * 1448 * 1448 * 4
    try {
      batch.reserve(4, Seq(Seq(3L, 1448L, 1448L)))
      assert(batch.allocated == 4 * rowBytes) // not miniBatchSize (64) rows' worth
      batch.reserve(2, Seq(Seq(3L, 1448L, 1448L)))
      assert(batch.allocated == 4 * rowBytes) // reused
      batch.release()
      assert(batch.allocated == 0)
      val huge = intercept[IllegalArgumentException](batch.reserve(1, Seq(Seq(3L, 1L << 28, 1L))))
      assert(
        huge.getMessage == "input 'x' (from column 'x') is 3.0 GiB per row, over the limit of " +
          "2.0 GiB that one ONNX Runtime input tensor can hold"
      )
      assert(batch.allocated == 0)
    } finally batch.release()
    assert(Bytes.show(BigInt(400L << 20)) == "400.0 MiB")
    assert(Bytes.show(BigInt(1023)) == "1023 bytes")
    assert(Bytes.show(BigInt(1536)) == "1.5 KiB")
  }
}
