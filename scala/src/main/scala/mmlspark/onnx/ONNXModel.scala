package mmlspark.onnx

import scala.util.Try

import mmlspark.contracts._
import org.apache.spark.ml.mmlspark.ArrayRowEncoder
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param._
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Row, SparkSession}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types._
import org.json4s.{JObject, JString}
import org.json4s.jackson.JsonMethods.{compact, parse, render}

/** Runs an ONNX model with ONNX Runtime over a DataFrame, a mini-batch of rows per run.
  *
  * The model comes from `modelLocation` (any Hadoop filesystem path, read once per executor) or
  * from bytes (`setModelPayload`, shipped once per executor). `feedDict` maps each model input to
  * the column it is read from and `fetchDict` each new column to the model output it receives; for
  * a model with one input and one output `inputCol` and `outputCol` are enough. Inputs may be
  * scalar, flat or nested array, ML vector or binary columns; a flat array is reshaped to the
  * model's per-row shape (dynamic dimensions from the column's `tensorShape` metadata, as
  * `ImageTransformer` writes it). Outputs become arrays of the matching type (vectors with
  * `vectorOutputs`), or scalars when a row's output is one value.
  *
  * Every executor JVM creates one ONNX Runtime session per model content, device and settings, and
  * by default its tasks share it, each running its own batches: on two CPU cores the benchmark
  * protocol measured the inference service no faster (on / off 0.96-1.00,
  * bench/results/summary.md), and on an H200 with 16 task threads slower (0.20-0.64,
  * bench/results/gpu-variants.md). Set on (`spark.mmlspark.onnx.inferenceService=true`; default
  * auto, on only for an ObjectDetector on the CPU), its worker threads alone call the session (one
  * on a GPU, one per executor core on a CPU), the executor's tasks hand them their rows, batches
  * are filled with the rows of all of them into direct buffers the workers reuse, and each task
  * reads and prepares its next rows while the current batch runs (settings in [[ServiceSettings]]);
  * on a GPU it holds less device memory (one calling thread: 3.2 GiB for ResNet-50 where 16 task
  * threads held 15.4 GiB, bench/results/gpu.md). Outputs of a declared shape are written into
  * reused buffers (`spark.mmlspark.onnx.pinOutputs`, default auto: on for CUDA, off on the CPU,
  * where pinned / unpinned measured 0.90-1.01). A row whose input is null or has the wrong number
  * of values gets null outputs and a message in `errorCol`; a model that cannot be loaded, or
  * inputs, outputs and columns that do not match, fail in `transformSchema` before any job runs.
  *
  * Memory per run is bounded by two Spark settings, read when the transform starts: the input and
  * output tensors of one run hold at most `spark.mmlspark.onnx.maxBatchBytes` (default 256m; a
  * mini-batch over it is split, a row over it alone runs by itself), and a row's value of an output
  * over `spark.mmlspark.onnx.maxOutputBytesPerRow` (default 64m) is that row's error, found before
  * it is copied into the JVM heap. A cancelled or killed task stops waiting at once and its queued
  * rows are dropped; a running ONNX Runtime call is terminated once no task waits for it, and at
  * JVM exit running calls are terminated before ONNX Runtime shuts down.
  */
final class ONNXModel(override val uid: String) extends Transformer with ONNXModelDecls {

  def this() = this(Identifiable.randomUID("ONNXModel"))

  final val optimizationLevel: Param[String] = new Param[String](
    this,
    "optimizationLevel",
    s"ONNX Runtime graph optimizations: ${ONNXModel.OptimizationLevels.describe}",
    ONNXModel.OptimizationLevels.isValid
  )

  setDefault(
    feedDict -> "{}",
    fetchDict -> "{}",
    softMaxDict -> "{}",
    argMaxDict -> "{}",
    intraOpThreads -> 0,
    optimizationLevel -> "all",
    cudaMemoryLimit -> 0L,
    cudnnConvAlgoSearch -> "EXHAUSTIVE",
    useTensorRT -> false,
    vectorOutputs -> false,
    softMaxVectors -> true,
    miniBatchSize -> 64,
    errorCol -> "onnxError"
  )

  def setFeedDict(value: Map[String, String]): this.type = set(feedDict, ONNXModel.toJson(value))
  def setFetchDict(value: Map[String, String]): this.type = set(fetchDict, ONNXModel.toJson(value))
  def setSoftMaxDict(value: Map[String, String]): this.type =
    set(softMaxDict, ONNXModel.toJson(value))
  def setArgMaxDict(value: Map[String, String]): this.type =
    set(argMaxDict, ONNXModel.toJson(value))
  def getOptimizationLevel: String = $(optimizationLevel)
  def setOptimizationLevel(value: String): this.type = set(optimizationLevel, value)

  private def fail(message: String): Nothing =
    throw new IllegalArgumentException(s"${SchemaUtils.stageName(this)}: $message")

  private def names(specs: Seq[TensorSpec]): String = specs.map(_.describe).mkString(", ")

  /** Which column feeds which model input, checked against the model and the schema. */
  private def feeds(schema: StructType, info: ModelInfo): Seq[Feed] = {
    val mapping = ONNXModel.parseMap($(feedDict))
    val pairs =
      if (mapping.nonEmpty) mapping.toSeq.map { case (input, column) =>
        info.inputs.find(_.name == input).getOrElse {
          fail(PlanMessages.UnknownInput("input" -> input, "inputs" -> names(info.inputs)))
        } -> column
      }
      else if (!isDefined(inputCol)) fail(PlanMessages.NoInputCol())
      else if (info.inputs.length != 1)
        fail(PlanMessages.ManyInputs("count" -> info.inputs.length, "inputs" -> names(info.inputs)))
      else Seq(info.inputs.head -> $(inputCol))
    val unfed = info.inputs.filterNot(i => pairs.exists(_._1.name == i.name))
    if (unfed.nonEmpty) fail(PlanMessages.Unfed("inputs" -> names(unfed)))
    pairs.map { case (spec, column) =>
      val element = spec.elementType.getOrElse {
        fail(PlanMessages.NotFeedable("input" -> spec.describe))
      }
      val field = SchemaUtils.requireColumnType(
        this,
        schema,
        column,
        PlanMessages.FeedType("expected" -> Feed.expected(element), "input" -> spec.describe)
      )(
        Feed.accepts(element, _)
      )
      val fromMetadata =
        if (field.metadata.contains("tensorShape")) field.metadata.getLongArray("tensorShape").toSeq
        else Nil
      if (Feed.isTransposed(fromMetadata, spec.rowShape)) {
        fail(
          PlanMessages.TransposedColumn(
            "column" -> column,
            "shape" -> Feed.show(fromMetadata),
            "input" -> spec.describe,
            "template" -> Feed.show(spec.rowShape)
          )
        )
      }
      val template =
        if (fromMetadata.length == spec.rowShape.length)
          spec.rowShape.zip(fromMetadata).map { case (m, c) => if (m >= 0) m else c }
        else spec.rowShape
      Feed(spec, element, column, schema.fieldIndex(column), field.dataType, template)
    }
  }

  // The model cut so that intermediate tensors fetchDict names are outputs, by (model hash, the
  // tensors fetched): cutting rewrites the model and inspecting it opens a session.
  @transient private var cut: ((String, Seq[String]), ModelInfo) = _

  // What `auto` means for the inference service on a CPU ([[ServiceSettings.autoOnCpu]]): set by a
  // stage that runs its model through this one and measured its workload faster with the service.
  private var serviceOnCpu = false

  private[mmlspark] def setServiceAutoOnCpu(on: Boolean): this.type = {
    serviceOnCpu = on
    this
  }

  /** The model as it runs: the model itself, or, when fetchDict names tensors inside it (a node's
    * output, or a node by name), the model cut so that exactly the fetched tensors are its outputs.
    */
  private def runnableInfo: ModelInfo = {
    val info = modelInfo
    val wanted = ONNXModel.parseMap($(fetchDict)).values.toSeq.distinct
    val outputs = info.outputs.map(_.name).toSet
    if (wanted.forall(outputs)) info
    else
      synchronized {
        val key = (info.source.hash, wanted)
        if (cut == null || cut._1 != key) {
          val bytes =
            try OnnxGraph.cut(modelBytes(SparkSession.active), wanted)
            catch {
              case e: IllegalArgumentException =>
                fail(
                  PlanMessages.NotCut(
                    "names" -> wanted.filterNot(outputs).mkString(", "),
                    "outputs" -> names(info.outputs),
                    "error" -> e.getMessage
                  )
                )
            }
          val what = s"${SchemaUtils.stageName(this)}: the model cut at ${wanted.mkString(", ")}"
          cut = (key, ModelInfo.ofPayload(bytes, what))
        }
        cut._2
      }
  }

  /** Which new column receives which model output. */
  private def fetches(info: ModelInfo): Seq[(String, TensorSpec, ElementType)] = {
    val mapping = ONNXModel.parseMap($(fetchDict))
    val pairs =
      if (mapping.nonEmpty) mapping.toSeq.map { case (column, output) =>
        column -> info.outputs.find(_.name == output).getOrElse {
          fail(PlanMessages.UnknownOutput("output" -> output, "outputs" -> names(info.outputs)))
        }
      }
      else if (!isDefined(outputCol)) fail(PlanMessages.NoOutputCol())
      else if (info.outputs.length != 1)
        fail(
          PlanMessages.ManyOutputs("count" -> info.outputs.length, "outputs" -> names(info.outputs))
        )
      else Seq($(outputCol) -> info.outputs.head)
    pairs.map { case (column, spec) =>
      val element = spec.elementType.orElse(spec.mapOf.map(_._2)).getOrElse {
        fail(PlanMessages.NotFetchable("output" -> spec.describe))
      }
      (column, spec, element)
    }
  }

  private def plan(
      schema: StructType,
      limits: RunLimits = RunLimits.default,
      service: ServiceSettings = ServiceSettings.default
  ): RunPlan = {
    val info = runnableInfo
    val inputs = feeds(schema, info)
    val outputs = fetches(info)
    def postProcessed(param: Param[String]): Seq[(Int, String)] =
      ONNXModel.parseMap($(param)).toSeq.map { case (source, target) =>
        val index = outputs.indexWhere(_._1 == source)
        if (index < 0)
          fail(
            PlanMessages.NotFetched(
              "param" -> param.name,
              "column" -> source,
              "fetched" -> outputs.map(_._1).mkString(", ")
            )
          )
        val (_, spec, element) = outputs(index)
        if (!element.isFloating || spec.rowShape.isEmpty)
          fail(
            PlanMessages
              .NotFloating("param" -> param.name, "column" -> source, "output" -> spec.describe)
          )
        index -> target
      }
    val batchable = inputs.forall(_.spec.batchDim.contains(-1L))
    val softMax = postProcessed(softMaxDict).map { case (index, column) =>
      SoftMax(index, column, $(softMaxVectors) && outputs(index)._2.rowShape.length == 1)
    }
    RunPlan(
      info.source,
      inputs,
      outputs,
      softMax,
      postProcessed(argMaxDict),
      if (batchable) $(miniBatchSize) else 1,
      HasDeviceType.DeviceTypes($(deviceType)),
      SessionSettings(
        $(intraOpThreads),
        ONNXModel.OptimizationLevels($(optimizationLevel)),
        $(cudaMemoryLimit),
        ONNXModel.ConvAlgoSearches($(cudnnConvAlgoSearch)),
        $(useTensorRT),
        fixedShapes = inputs.forall(_.rowTemplate.forall(_ >= 0))
      ),
      $(vectorOutputs),
      limits,
      service
    )
  }

  private def outputSchema(schema: StructType, p: RunPlan): StructType = {
    val asVector = $(vectorOutputs)
    val fetched = p.fetches.map { case (column, spec, element) =>
      StructField(
        column,
        Outputs.columnType(spec, element, asVector),
        nullable = true,
        new MetadataBuilder().putLongArray("tensorShape", spec.rowShape.toArray).build()
      )
    }
    val derived = p.softMax.map { s =>
      StructField(s.column, if (s.asVector) VectorType else fetched(s.index).dataType)
    } ++
      p.argMax.map { case (_, c) => StructField(c, DoubleType) }
    val added = (fetched ++ derived).map(_.name) :+ $(errorCol)
    added.foreach(SchemaUtils.requireAbsent(this, schema, _))
    SchemaUtils.requireDistinct(this, "output columns", added)
    StructType(schema.fields ++ fetched ++ derived :+ StructField($(errorCol), StringType))
  }

  override def transformSchema(schema: StructType): StructType = outputSchema(schema, plan(schema))

  override def transform(dataset: Dataset[_]): DataFrame = {
    // transformSchema's gate, on the whole input.
    val whole = plan(dataset.schema)
    outputSchema(dataset.schema, whole)
    // Columns left to be computed later (read_images' image) stay so: mapPartitions would make
    // Spark compute every input column, read or not.
    DeferredColumns.around(dataset, whole.feeds.map(_.column))(run)
  }

  private def run(dataset: DataFrame): DataFrame = {
    val conf = dataset.sparkSession.conf
    val service = ServiceSettings.from(conf).copy(autoOnCpu = serviceOnCpu)
    val p = plan(dataset.schema, RunLimits.from(conf), service)
    val schema = outputSchema(dataset.schema, p)
    runnableInfo.ship(dataset.sparkSession)
    val arrays = p.feeds.filter(_.columnType.isInstanceOf[ArrayType]).map(_.ordinal).toSet
    val result = dataset
      .toDF()
      .as[Row](ArrayRowEncoder.decoder(dataset.schema, arrays))
      .mapPartitions(p.run)(ArrayRowEncoder.encoder(schema, arrays))
      .toDF()
    // mapPartitions keeps types, not metadata: put back each column's (tensor shapes, ML attributes).
    result.select(
      schema.fields
        .map(f => col(SchemaUtils.quoted(f.name)).as(f.name, f.metadata))
        .toIndexedSeq: _*
    )
  }

  override def copy(extra: ParamMap): ONNXModel = {
    val copied = defaultCopy[ONNXModel](extra)
    copyModelTo(copied)
    copied
  }
}

object ONNXModel extends StageReadable[ONNXModel] {

  /** `optimizationLevel`: ours, with ONNX Runtime's Java (`ALL_OPT`, as SynapseML takes them) and
    * Python (`ORT_ENABLE_ALL`) names.
    */
  val OptimizationLevels: Choices = Choices(
    Seq("none", "basic", "extended", "all"),
    Map(
      "NO_OPT" -> "none",
      "BASIC_OPT" -> "basic",
      "EXTENDED_OPT" -> "extended",
      "ALL_OPT" -> "all",
      "ORT_DISABLE_ALL" -> "none",
      "ORT_ENABLE_BASIC" -> "basic",
      "ORT_ENABLE_EXTENDED" -> "extended",
      "ORT_ENABLE_ALL" -> "all"
    )
  )

  /** `cudnnConvAlgoSearch`. */
  val ConvAlgoSearches: Choices = Choices(Seq("EXHAUSTIVE", "HEURISTIC", "DEFAULT"))

  override protected def create(uid: String, path: String, spark: SparkSession): ONNXModel =
    HasOnnxModel.loadModel(new ONNXModel(uid), path, spark)

  // A stage saved before softMaxVectors gives its softmax columns the type it gave then.
  override protected def loaded(stage: ONNXModel, savedParams: Set[String]): Unit =
    if (!savedParams("softMaxVectors")) stage.setSoftMaxVectors(false)

  def parseMap(json: String): Map[String, String] = parse(json) match {
    case JObject(fields) =>
      fields.map {
        case (k, JString(v)) if k.nonEmpty && v.nonEmpty => k -> v
        case (k, v) =>
          throw new IllegalArgumentException(s"'$k' must map to a non-empty string, not $v")
      }.toMap
    case other =>
      throw new IllegalArgumentException(s"expected a JSON object of strings, not $other")
  }

  def isStringMap(json: String): Boolean = json != null && Try(parseMap(json)).isSuccess

  def toJson(map: Map[String, String]): String =
    compact(render(JObject(map.toList.sortBy(_._1).map { case (k, v) => k -> JString(v) })))
}
