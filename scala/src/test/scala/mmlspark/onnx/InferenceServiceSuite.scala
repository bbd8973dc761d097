package mmlspark.onnx

import mmlspark.contracts.SparkTestSession
import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.functions.{col, udf}
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

class InferenceServiceSuite extends AnyFunSuite with BeforeAndAfterEach {
  import OnnxFixtures._

  private lazy val spark = SparkTestSession.spark

  private def withConf[T](settings: (String, String)*)(f: => T): T = {
    val before = settings.map { case (k, _) => k -> spark.conf.getOption(k) }
    settings.foreach { case (k, v) => spark.conf.set(k, v) }
    try f
    finally
      before.foreach {
        case (k, Some(v)) => spark.conf.set(k, v)
        case (k, None) => spark.conf.unset(k)
      }
  }

  override def afterEach(): Unit = InferenceService.resetLargestBatch()

  // Off by default on a CPU: tests of the service set it on.
  private val serviceOn = ServiceSettings.EnabledKey -> "true"

  /** `values` as one-element index arrays, spread over `partitions` partitions; reading each row
    * takes 50 ms, so that every task has taken the service (at its first row) before any hands its
    * rows over (after its last).
    */
  private def indices(values: Seq[Long], partitions: Int): DataFrame = {
    import spark.implicits._
    val slow = udf { (index: Long) =>
      Thread.sleep(50)
      Array(index)
    }
    values.zipWithIndex
      .map { case (v, i) => (i.toLong, v) }
      .toDF("id", "raw")
      .repartition(partitions)
      .select(col("id"), slow(col("raw")).as("index"))
  }

  private def lookup = new ONNXModel()
    .setModelLocation(path("lookup.onnx"))
    .setFeedDict(Map("index" -> "index"))
    .setFetchDict(Map("value" -> "value"))
    .setMiniBatchSize(64)

  private def byId(df: DataFrame): Map[Long, Row] =
    df.collect().map(r => r.getAs[Long]("id") -> r).toMap

  test("rows of concurrent tasks share a batch, and each task gets its own rows' results back") {
    val values = (0 until 12).map(i => (i % 5).toLong)
    val out = withConf(serviceOn, ServiceSettings.MaxWaitKey -> "2s") {
      byId(lookup.transform(indices(values, 2)))
    }
    // Two tasks of 6 rows each: one batch of 12 rows.
    assert(InferenceService.largestBatch == 12)
    assert(out.size == 12)
    out.foreach { case (id, row) =>
      assert(row.isNullAt(row.fieldIndex("onnxError")), row)
      assert(row.getSeq[Float](row.fieldIndex("value")) == Seq(10f * (values(id.toInt) + 1)))
    }
  }

  test("a row the model fails on in a shared batch fails alone; the service runs on") {
    val values = (0 until 12).map(i => if (i == 7) 9L else (i % 5).toLong)
    val out = withConf(serviceOn, ServiceSettings.MaxWaitKey -> "2s") {
      byId(lookup.transform(indices(values, 2)))
    }
    assert(InferenceService.largestBatch == 12)
    assert(out(7L).getAs[String]("onnxError").contains("idx=9 must be within"))
    assert(out(7L).isNullAt(out(7L).fieldIndex("value")))
    (out - 7L).foreach { case (id, row) =>
      assert(row.isNullAt(row.fieldIndex("onnxError")), row)
      assert(row.getSeq[Float](row.fieldIndex("value")) == Seq(10f * (values(id.toInt) + 1)))
    }
  }

  test("results are the same with the service on and off, with 1 and 2 concurrent tasks") {
    val model = new ONNXModel()
      .setModelLocation(path("small_cnn.onnx"))
      .setFeedDict(Map("image" -> "x"))
      .setFetchDict(Map("y" -> "logits"))
      .setMiniBatchSize(7)
    val random = new scala.util.Random(7)
    val rows = (0 until 40).map(i => (i.toLong, Array.fill(3, 16, 16)(random.nextFloat())))
    import spark.implicits._
    def scored(partitions: Int, service: Boolean): Map[Long, Seq[Float]] =
      withConf(ServiceSettings.EnabledKey -> service.toString) {
        val df = rows.toDF("id", "x").repartition(partitions)
        model
          .transform(df)
          .collect()
          .map { r =>
            assert(r.isNullAt(r.fieldIndex("onnxError")), r)
            r.getAs[Long]("id") -> r.getSeq[Float](r.fieldIndex("y")).toSeq
          }
          .toMap
      }
    val reference = scored(1, service = false)
    for (partitions <- Seq(1, 2, 5); service <- Seq(true, false)) {
      val out = scored(partitions, service)
      assert(out.keySet == reference.keySet)
      out.foreach { case (id, y) =>
        y.zip(reference(id)).foreach { case (a, b) =>
          assert(math.abs(a - b) <= 1e-5 * math.max(1.0, math.abs(b)), s"row $id: $a vs $b")
        }
      }
    }
  }

  test("one session per model, device and settings; the service holds none while idle") {
    OrtSessions.closeIdle(0)
    val before = OrtSessions.created
    val model = lookup
    val df = indices((0 until 8).map(_ % 5L), 2)
    withConf(serviceOn) {
      model.transform(df).collect()
      model.transform(df).collect()
    }
    assert(OrtSessions.created - before == 1)
    val key = OrtSessions.openKeys.filter(_.modelHash == model.modelInfo.source.hash)
    assert(key.size == 1)
    // On a CPU the service runs a batch per core (local[2]: two workers), one thread each.
    assert(key.head.settings.intraOpThreads == 1)
    assert(InferenceService.workersOf(key.head) == Seq(2))
    assert(OrtSessions.closeIdle(0) >= 1)
    assert(InferenceService.queued == 0)
  }

  test("by default a CPU run goes through no service; `auto` is on for CUDA, off on the CPU") {
    // The rule for pinned outputs (bench/README.md; the service has its own, `served`): on for the GPU;
    // off on the CPU, where the protocol measured the
    // service and pinned outputs no faster. true and false mean the same on every device.
    import DeviceSwitch.{Auto, Off, On}
    assert(!Auto.on(Cpu) && Auto.on(Cuda(0)) && Auto.on(Cuda(3)))
    for (device <- Seq(Cpu, Cuda(0), Cuda(1))) assert(On.on(device) && !Off.on(device))
    assert(ServiceSettings.default.enabled == Auto && ServiceSettings.default.pinOutputs == Auto)
    // A default run on this CPU: the tasks run their own batches, so the service runs none.
    val values = Seq(3L, 0L, 4L, 1L)
    val batches = InferenceService.batchesRun
    val out = byId(lookup.transform(indices(values, 2)))
    assert(InferenceService.batchesRun == batches && InferenceService.largestBatch == 0)
    assert(out.size == 4)
    out.foreach { case (id, row) =>
      assert(row.isNullAt(row.fieldIndex("onnxError")), row)
      assert(row.getSeq[Float](row.fieldIndex("value")) == Seq(10f * (values(id.toInt) + 1)))
    }
    // Set on, the same job goes through the service.
    withConf(serviceOn)(lookup.transform(indices(values, 2)).collect())
    assert(InferenceService.batchesRun > batches)
  }

  test(
    "`auto` means the service on a CPU where the stage says so, never on a GPU; true and false win"
  ) {
    import DeviceSwitch.{Auto, Off, On}
    val measured = ServiceSettings.default.copy(autoOnCpu = true)
    assert(measured.served(Cpu) && !measured.served(Cuda(0)))
    assert(!ServiceSettings.default.served(Cpu) && !ServiceSettings.default.served(Cuda(1)))
    for (device <- Seq(Cpu, Cuda(0)); cpu <- Seq(true, false)) {
      assert(ServiceSettings.default.copy(enabled = On, autoOnCpu = cpu).served(device))
      assert(!ServiceSettings.default.copy(enabled = Off, autoOnCpu = cpu).served(device))
    }
    assert(measured.enabled == Auto)
  }

  test("an ObjectDetector runs through the service on a CPU by default, and not when set off") {
    import spark.implicits._
    val mat = mmlspark.image.ImageFixtures.patternMat()
    val png =
      try mmlspark.image.ImageFixtures.encode(mat, ".png")
      finally mat.release()
    val photos = Seq.tabulate(4)(i => (s"p$i.png", png)).toDF("path", "content").repartition(2)
    def detect(): Int = new mmlspark.detection.ObjectDetector()
      .setModelPayload(bytes("yolo_echo.onnx"))
      .setInputCol("content")
      .transform(photos)
      .filter(col("detectionError").isNull)
      .count()
      .toInt
    val before = InferenceService.batchesRun
    assert(detect() == 4)
    assert(InferenceService.batchesRun > before)
    val served = InferenceService.batchesRun
    assert(withConf(ServiceSettings.EnabledKey -> "false")(detect()) == 4)
    assert(InferenceService.batchesRun == served)
  }

  test("the service and pinned outputs take auto, true or false in any case, and nothing else") {
    for (
      key <- Seq(ServiceSettings.EnabledKey, ServiceSettings.PinOutputsKey);
      (text, expected) <- Seq(
        "auto" -> DeviceSwitch.Auto,
        " AUTO " -> DeviceSwitch.Auto,
        "True" -> DeviceSwitch.On,
        "TRUE" -> DeviceSwitch.On,
        "false" -> DeviceSwitch.Off,
        " fAlSe" -> DeviceSwitch.Off
      )
    ) withConf(key -> text) {
      val settings = ServiceSettings.from(spark.conf)
      val read =
        if (key == ServiceSettings.EnabledKey) settings.enabled else settings.pinOutputs
      assert(read == expected, s"$key=$text")
    }
    for (
      key <- Seq(ServiceSettings.EnabledKey, ServiceSettings.PinOutputsKey);
      text <- Seq("on", "1", "")
    ) {
      val error = withConf(key -> text) {
        intercept[IllegalArgumentException](ServiceSettings.from(spark.conf))
      }
      assert(
        error.getMessage == s"$key must be auto, true or false, not '$text'",
        error.getMessage
      )
    }
  }

  test("settings are checked on the driver, naming the setting") {
    for (
      (key, value) <- Seq(
        ServiceSettings.EnabledKey -> "maybe",
        ServiceSettings.MaxWaitKey -> "soon",
        ServiceSettings.MaxWaitKey -> "1h",
        ServiceSettings.BatchesInFlightKey -> "0",
        ServiceSettings.PadBatchesKey -> "often",
        ServiceSettings.PinOutputsKey -> "yes"
      )
    ) {
      val error = withConf(key -> value) {
        intercept[IllegalArgumentException](lookup.transform(indices(Seq(1L, 2L), 1)))
      }
      assert(error.getMessage.contains(key) && error.getMessage.contains(value), error.getMessage)
    }
    withConf(ServiceSettings.MaxWaitKey -> "500us", ServiceSettings.BatchesInFlightKey -> "3") {
      assert(
        ServiceSettings.from(spark.conf) == ServiceSettings(DeviceSwitch.Auto, 500000L, 3)
      )
    }
    withConf(ServiceSettings.MaxWaitKey -> "5") {
      assert(ServiceSettings.from(spark.conf).maxWaitNanos == 5000000L)
    }
    assert(ServiceSettings.from(spark.conf).pinOutputs == DeviceSwitch.Auto)
    withConf(ServiceSettings.PinOutputsKey -> "False") {
      assert(ServiceSettings.from(spark.conf).pinOutputs == DeviceSwitch.Off)
    }
  }
}
