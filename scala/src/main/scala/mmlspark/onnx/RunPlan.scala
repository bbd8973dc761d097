package mmlspark.onnx

import java.util.concurrent.ConcurrentHashMap

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import ai.onnxruntime.{OnnxTensor, OnnxValue, OrtSession}
import mmlspark.contracts.RowResults
import org.apache.spark.{TaskContext, TaskKilledException}
import org.apache.spark.ml.mmlspark.{SparkInternals, TaskCpus}
import org.apache.spark.sql.{Row, RuntimeConfig}

/** How much memory one ONNX Runtime run of [[ONNXModel]] may hold, from Spark settings (read on the
  * driver when the transform is planned, so `spark.conf.set` applies to the next transform).
  *
  * @param maxBatchBytes
  *   bytes of input and output tensors one run may hold; a mini-batch over it is split, and a row
  *   over it alone runs by itself
  * @param maxOutputBytesPerRow
  *   bytes one row's value of one output may take; a larger one is that row's error
  */
final case class RunLimits(maxBatchBytes: Long, maxOutputBytesPerRow: Long)

object RunLimits {
  val MaxBatchBytesKey = "spark.mmlspark.onnx.maxBatchBytes"
  val MaxOutputBytesPerRowKey = "spark.mmlspark.onnx.maxOutputBytesPerRow"
  val DefaultMaxBatchBytes = "256m"
  val DefaultMaxOutputBytesPerRow = "64m"

  val default: RunLimits = RunLimits(256L << 20, 64L << 20)

  /** The limits set in `conf` (sizes such as "256m", "1g" or a number of bytes), checked: a
    * misconfiguration fails here, on the driver, naming the setting.
    */
  def from(conf: RuntimeConfig): RunLimits = {
    def bytes(key: String, default: String): Long = {
      val text = conf.get(key, default)
      val value =
        try SparkInternals.byteStringAsBytes(text)
        catch {
          case NonFatal(_) =>
            throw new IllegalArgumentException(
              s"$key must be a size such as 256m or 1g (or a number of bytes), not '$text'"
            )
        }
      if (value < 1 || value > TensorBatch.MaxBuffer)
        throw new IllegalArgumentException(
          s"$key must be between 1 byte and ${Bytes.show(BigInt(TensorBatch.MaxBuffer))}, not '$text'"
        )
      value
    }
    RunLimits(
      bytes(MaxBatchBytesKey, DefaultMaxBatchBytes),
      bytes(MaxOutputBytesPerRowKey, DefaultMaxOutputBytesPerRow)
    )
  }
}

/** A softmax column: of fetched output `index`, into `column`, as an ML vector or as fetched. */
final case class SoftMax(index: Int, column: String, asVector: Boolean)

/** Everything an executor needs to run an [[ONNXModel]] over a partition: resolved on the driver by
  * `transformSchema`'s checks, shipped with the task.
  *
  * @param softMax
  *   the softmax columns of fetched outputs
  * @param argMax
  *   (index into `fetches`, new column) pairs
  */
final case class RunPlan(
    source: ModelSource,
    feeds: Seq[Feed],
    fetches: Seq[(String, TensorSpec, ElementType)],
    softMax: Seq[SoftMax],
    argMax: Seq[(Int, String)],
    batchSize: Int,
    deviceType: String,
    settings: SessionSettings,
    asVector: Boolean,
    limits: RunLimits = RunLimits.default,
    service: ServiceSettings = ServiceSettings.default
) {

  private[onnx] def fetchNames: java.util.Set[String] = fetches.map(_._2.name).toSet.asJava

  /** What rows must share to run in one batch (the model's session aside). */
  private[onnx] lazy val batchKey: Any =
    (feeds, fetches, asVector, limits, service.padBatches, service.pinOutputs)

  /** The output rows of a partition: each input row, its outputs and its error, in input order.
    * Rows are read a mini-batch at a time and given back a run at a time, so that the outputs of
    * one run (per batch in flight) at most are held at once. With the inference service (off by
    * default but for an ObjectDetector on a CPU: [[ServiceSettings.served]]) the executor's service
    * runs the batches, and the task reads and prepares the rows of the next batch meanwhile;
    * without it, the task runs its own.
    */
  def run(rows: Iterator[Row]): Iterator[Row] = {
    if (!rows.hasNext) return Iterator.empty // no session for an empty partition
    val cuda = deviceType != "cpu" && Device.cudaAvailable
    val device = Device.select(deviceType, Device.taskGpus, cuda)
    // Through the service, a GPU session has one worker (one calling thread) and the executor's
    // cores as intra-op threads; a CPU session has a worker per core, one intra-op thread each
    // (or the executor's cores split into runs of intraOpThreads). Without it, each task uses its
    // CPU share.
    val cores = SparkInternals.executorCores
    // The device decides what `auto` settings mean: here for the service, in BatchRunner for
    // pinned outputs.
    val served = service.served(device)
    val (threads, workers) = device match {
      case _ if !served =>
        (if (settings.intraOpThreads > 0) settings.intraOpThreads else TaskCpus.get, 0)
      case Cuda(_) => (if (settings.intraOpThreads > 0) settings.intraOpThreads else cores, 1)
      case Cpu =>
        val perRun = math.max(1, settings.intraOpThreads)
        (perRun, math.max(1, cores / perRun))
    }
    // The service's intra-op threads do not spin between runs: the executor's tasks need the cores
    // to prepare the next batch meanwhile.
    val key = SessionKey(
      source.hash,
      device,
      settings.copy(intraOpThreads = threads, spinning = !served)
    )
    // The task creates the session (a model that cannot load fails the task) and holds it while it
    // runs, so that it stays open between the service's batches.
    val session = OrtSessions.acquireForTask(key, source)
    if (served) new ServiceRun(key, workers).rows(rows)
    else {
      val runner = new BatchRunner(this, key)
      val runs = OrtRuns.forTask()
      Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => runner.release()))
      rows.grouped(batchSize).flatMap(group => runner.group(session, runs, group.toIndexedSeq))
    }
  }

  /** Input bytes of one row of the per-row `shapes` (a string counted as a reference). */
  private[onnx] def inputBytes(shapes: Seq[Seq[Long]]): BigInt = feeds.indices.foldLeft(BigInt(0)) {
    (sum, f) => sum + shapes(f).foldLeft(BigInt(RunPlan.bytesOf(feeds(f).element)))(_ * _)
  }

  // An output fixed in the model at more bytes per row than the limit: no row can get it.
  private[onnx] lazy val fixedOutputError: Option[OutputTooLarge] = fetches.iterator
    .flatMap { case (_, spec, element) =>
      Outputs
        .fixedRowBytes(spec, element)
        .filter(_ > limits.maxOutputBytesPerRow)
        .map(Outputs.tooLarge(spec, _, limits.maxOutputBytesPerRow))
    }
    .toList // a few outputs
    .headOption

  private[onnx] lazy val fixedOutputBytes: Option[BigInt] = {
    val sizes = fetches.map { case (_, spec, element) => Outputs.fixedRowBytes(spec, element) }
    if (sizes.forall(_.isDefined)) Some(sizes.flatten.sum) else None
  }

  /** How many rows of the per-row `shapes` one run of session `key` takes: as many as fit the byte
    * budget, at least one. Outputs count once their size per row is known, from the model or from
    * an earlier run of rows of these shapes; until then a single row runs first, so that a model
    * whose output is huge per row never runs a whole batch of them.
    */
  private[onnx] def rowsPerRun(key: SessionKey, shapes: Seq[Seq[Long]]): Int =
    fixedOutputBytes.orElse(RunPlan.learnedOutputBytes(key, shapes)) match {
      case None => 1
      case Some(output) =>
        val perRow = inputBytes(shapes) + output
        if (perRow <= 0) batchSize
        else (BigInt(limits.maxBatchBytes) / perRow).max(1).min(batchSize).toInt
    }

  /** The per-feed shapes of `row`'s values, or why the row cannot be fed. */
  private[onnx] def rowShapes(row: Row): Either[String, Seq[Seq[Long]]] =
    try
      Right(feeds.map { f =>
        val value = row.get(f.ordinal)
        if (value == null)
          throw new IllegalArgumentException(TensorMessages.NullInput("column" -> f.column))
        f.rowShape(value)
      })
    catch { case NonFatal(e) => Left(RowResults.describe(e)) }

  /** A partition's rows through the executor's [[InferenceService]]: consecutive rows of equal
    * shapes go over as one request of at most a run's rows; up to `batchesInFlight` requests are
    * out at once, and the next is read (decoded, transformed upstream) while the service runs the
    * earlier ones. Rows come back in input order; a row that cannot be fed fails only itself.
    */
  private final class ServiceRun(key: SessionKey, workers: Int) {
    private val (inference, ticket) = InferenceService.forTask(key, workers)

    import RunPlan.{Failed, Place, Sent}

    def rows(input: Iterator[Row]): Iterator[Row] = {
      val rows = input.buffered
      // The next places in order: a run of rows of one shape becomes one request.
      val places: Iterator[Place] = new Iterator[Place] {
        // The shapes of rows.head when a request ended before it, so they are read once.
        private var headShapes: Either[String, Seq[Seq[Long]]] = _
        def hasNext: Boolean = rows.hasNext
        def next(): Place = {
          val row = rows.next()
          val first = if (headShapes != null) headShapes else rowShapes(row)
          headShapes = null
          first match {
            case Left(error) => Failed(row, error)
            case Right(shapes) =>
              val limit = rowsPerRun(key, shapes)
              val segment = ArrayBuffer(row)
              while (headShapes == null && segment.length < limit && rows.hasNext) {
                rowShapes(rows.head) match {
                  case Right(s) if s == shapes => segment += rows.next()
                  case other => headShapes = other // the next row starts another place
                }
              }
              val request = new ServiceRequest(RunPlan.this, segment.toIndexedSeq, shapes, ticket)
              inference.submit(request)
              Sent(request)
          }
        }
      }
      new Iterator[Row] {
        private val pending = new java.util.ArrayDeque[Place]()
        private var sent = 0
        private var current: Iterator[Row] = Iterator.empty

        private def fill(): Unit =
          while (sent < service.batchesInFlight && pending.size < batchSize && places.hasNext) {
            val place = places.next()
            if (place.isInstanceOf[Sent]) sent += 1
            pending.add(place)
          }

        def hasNext: Boolean = {
          while (!current.hasNext && { fill(); !pending.isEmpty }) {
            current = pending.poll() match {
              case Failed(row, error) => Iterator.single(outputRow(row, Left(error)))
              case Sent(request) =>
                sent -= 1
                val results = request.await()
                fill() // hand over the next batch before emitting this one's rows
                request.rows.indices.iterator.map(k => outputRow(request.rows(k), results(k)))
            }
          }
          current.hasNext
        }

        def next(): Row = {
          if (!hasNext) throw new NoSuchElementException("no more rows")
          current.next()
        }
      }
    }
  }

  private[onnx] def outputRow(input: Row, result: Either[String, Array[Any]]): Row = {
    val width = input.length
    val out = new Array[Any](width + fetches.length + softMax.length + argMax.length + 1)
    var i = 0
    while (i < width) { out(i) = input.get(i); i += 1 }
    result match {
      case Right(values) =>
        System.arraycopy(values, 0, out, width, values.length)
        var at = width + values.length
        softMax.foreach { s =>
          out(at) = Outputs.softMax(values(s.index), s.asVector)
          at += 1
        }
        argMax.foreach { case (k, _) => out(at) = Outputs.argMax(values(k)); at += 1 }
      case Left(error) => out(out.length - 1) = error
    }
    SparkInternals.rowOf(out)
  }
}

/** Runs batches of one [[RunPlan]] on session `key`: its reused input buffers and the isolation of
  * rows a run fails on; the runs' options come with each call. Not thread-safe: one per task, or
  * the inference service's thread.
  */
private[onnx] final class BatchRunner(plan: RunPlan, key: SessionKey) {
  import plan.{feeds, fetches, limits}

  private val batch = new TensorBatch(feeds)
  private val outputs = new OutputBuffers(fetches)
  private val pinOutputs = plan.service.pinOutputs.on(key.device)

  /** Frees the input and output buffers (the next run allocates them again). */
  def release(): Unit = {
    batch.release()
    outputs.release()
  }

  def rowsPerRun(shapes: Seq[Seq[Long]]): Int = plan.rowsPerRun(key, shapes)

  /** The output rows of a mini-batch, produced a run at a time as they are read. */
  def group(session: OrtSession, runs: TaskRuns, rows: IndexedSeq[Row]): Iterator[Row] = {
    val shapes = rows.map(plan.rowShapes)
    // Runs of consecutive rows of equal shapes, split to fit the budget; a row that cannot be
    // fed only fails itself.
    new Iterator[Iterator[Row]] {
      private var i = 0
      def hasNext: Boolean = i < rows.length
      def next(): Iterator[Row] = shapes(i) match {
        case Left(error) =>
          i += 1
          Iterator.single(plan.outputRow(rows(i - 1), Left(error)))
        case Right(shape) =>
          val limit = i + rowsPerRun(shape)
          var j = i + 1
          while (j < rows.length && j < limit && shapes(j) == shapes(i)) j += 1
          val indices = i until j
          val results = new Array[Either[String, Array[Any]]](indices.length)
          runRows(session, runs, rows, indices, shape, results, indices.start)
          i = j
          indices.iterator.map(k => plan.outputRow(rows(k), results(k - indices.start)))
      }
    }.flatMap(identity)
  }

  /** Runs `rows` (all of the per-row `shapes`) into `results`, a run of at most [[rowsPerRun]] rows
    * at a time.
    */
  def runAll(
      session: OrtSession,
      runs: TaskRuns,
      rows: IndexedSeq[Row],
      shapes: Seq[Seq[Long]],
      results: Array[Either[String, Array[Any]]]
  ): Unit = {
    var i = 0
    while (i < rows.length) {
      val j = math.min(rows.length, i + rowsPerRun(shapes))
      runRows(session, runs, rows, i until j, shapes, results, 0)
      i = j
    }
  }

  /** Runs rows `indices` as one batch into `results` (from `results(indices.start - offset)`); if
    * the run fails, runs them one by one so that only the rows the model rejects get an error. An
    * output too large per row fails every row at once; an `OutOfMemoryError` frees the buffers and
    * fails the row, never the task.
    */
  private def runRows(
      session: OrtSession,
      runs: TaskRuns,
      rows: IndexedSeq[Row],
      indices: Range,
      shapes: Seq[Seq[Long]],
      results: Array[Either[String, Array[Any]]],
      offset: Int,
      pad: Boolean = true
  ): Unit = {
    // Rows run again one by one are not padded: after an OutOfMemoryError that would fail them all.
    def retryOneByOne(): Unit =
      indices.foreach(k =>
        runRows(session, runs, rows, k to k, shapes, results, offset, pad = false)
      )
    def failAll(message: String): Unit =
      indices.foreach(k => results(k - offset) = Left(message))
    try {
      plan.fixedOutputError.foreach(e => throw e)
      val values = execute(session, runs, rows, indices, shapes, pad)
      indices.zip(values).foreach { case (k, v) => results(k - offset) = Right(v) }
    } catch {
      case e: OutputTooLarge => failAll(e.getMessage)
      case e: OutOfMemoryError =>
        batch.release()
        if (indices.length > 1) retryOneByOne()
        else
          failAll(
            s"out of memory running the model on this row (its inputs are " +
              s"${Bytes.show(plan.inputBytes(shapes))}): ${e.getMessage}"
          )
      case NonFatal(e) =>
        stopIfTerminated(runs)
        if (indices.length > 1) retryOneByOne() else failAll(RowResults.describe(e))
    }
  }

  /** After a failed run: if the task was killed, ends it as killed (its runs were terminated, so
    * retrying rows would only fail them); if the JVM is exiting, fails it.
    */
  private def stopIfTerminated(runs: TaskRuns): Unit =
    runs.terminated.orElse(if (OrtRuns.exiting) Some("the JVM is exiting") else None).foreach {
      why =>
        if (Option(TaskContext.get()).exists(_.isInterrupted()))
          throw new TaskKilledException(why)
        throw new IllegalStateException(s"ONNX Runtime runs were terminated: $why")
    }

  private def execute(
      session: OrtSession,
      runs: TaskRuns,
      rows: IndexedSeq[Row],
      indices: Range,
      shapes: Seq[Seq[Long]],
      pad: Boolean
  ): Seq[Array[Any]] = {
    val n = indices.length
    // With padBatches, a short batch runs at the size of a full run (zero rows after the real
    // ones), so that the model always sees the same shapes.
    val size = if (pad && plan.service.padBatches) math.max(n, rowsPerRun(shapes)) else n
    batch.reserve(size, shapes)
    feeds.indices.foreach { f =>
      val count = shapes(f).product
      var k = 0
      while (k < n) {
        batch.fill(f, k, count, rows(indices.start + k).get(feeds(f).ordinal))
        k += 1
      }
      if (size > n) batch.zero(f, n, size, count)
    }
    val env = OrtSessions.environment
    val tensors = new java.util.HashMap[String, OnnxTensor]()
    try {
      feeds.indices.foreach { f =>
        val batched = feeds(f).spec.batchDim.isDefined
        tensors.put(feeds(f).spec.name, batch.tensor(env, f, size, shapes(f), batched))
      }
      val pinned =
        if (pinOutputs) outputs.pin(env, size)
        else java.util.Collections.emptyMap[String, OnnxValue]()
      try {
        val requested = new java.util.HashSet[String](plan.fetchNames)
        requested.removeAll(pinned.keySet())
        val result = OrtRuns.run(runs, session, tensors, requested, pinned)
        try {
          outputs.confirm(result, size)
          learn(shapes, result, pinned, size)
          val perOutput = fetches.map { case (_, spec, element) =>
            Outputs.perRow(
              output(result, pinned, spec.name),
              spec,
              element,
              size,
              plan.asVector,
              limits.maxOutputBytesPerRow,
              if (pinned.containsKey(spec.name)) outputs.written(spec.name) else None
            )
          }
          (0 until n).map(k => perOutput.map(_(k)).toArray)
        } finally result.close()
      } finally pinned.values().forEach(_.close())
    } finally tensors.values().forEach(_.close())
  }

  /** Output `name` of a run: ONNX Runtime's, or the pinned tensor it wrote into. */
  private def output(
      result: OrtSession.Result,
      pinned: java.util.Map[String, OnnxValue],
      name: String
  ): OnnxValue = {
    val own = result.get(name)
    if (own.isPresent) own.get() else pinned.get(name)
  }

  /** Records the output bytes per row of a run, for the batch sizes of later runs. */
  private def learn(
      shapes: Seq[Seq[Long]],
      result: OrtSession.Result,
      pinned: java.util.Map[String, OnnxValue],
      rows: Int
  ): Unit =
    if (plan.fixedOutputBytes.isEmpty) {
      val perRow = fetches.foldLeft(BigInt(0)) { case (sum, (_, spec, element)) =>
        output(result, pinned, spec.name) match {
          case t: OnnxTensor =>
            sum + BigInt(t.getInfo.getNumElements / rows) * RunPlan.bytesOf(element)
          case _ => sum
        }
      }
      RunPlan.recordOutputBytes(key, shapes, perRow)
    }
}

object RunPlan {

  /** One place in a task's output through the service: a row that failed before the model, or a
    * request.
    */
  private sealed trait Place
  private final case class Failed(row: Row, error: String) extends Place
  private final case class Sent(request: ServiceRequest) extends Place

  /** Bytes of one value of `e` in a run (a string counted as a reference). */
  private[onnx] def bytesOf(e: ElementType): Int = if (e == ElementType.Str) 8 else e.bytes

  // Output bytes per row seen in this JVM, by session and per-row input shapes: the largest seen,
  // as outputs of a data-dependent size (detections) vary from run to run.
  private val outputBytes = new ConcurrentHashMap[(SessionKey, Seq[Seq[Long]]), BigInt]()
  private val maxRemembered = 4096

  private[onnx] def learnedOutputBytes(key: SessionKey, shapes: Seq[Seq[Long]]): Option[BigInt] =
    Option(outputBytes.get((key, shapes)))

  private[onnx] def recordOutputBytes(
      key: SessionKey,
      shapes: Seq[Seq[Long]],
      perRow: BigInt
  ): Unit = {
    if (outputBytes.size() > maxRemembered) outputBytes.clear()
    outputBytes.merge((key, shapes), perRow, (a, b) => a.max(b))
  }
}
