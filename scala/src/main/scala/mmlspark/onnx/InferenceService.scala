package mmlspark.onnx

import java.util.concurrent.{ConcurrentHashMap, CountDownLatch, LinkedBlockingQueue, TimeUnit}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}

import scala.collection.mutable.ArrayBuffer
import scala.util.Try
import scala.util.control.NonFatal

import org.apache.spark.{TaskContext, TaskKilledException}
import org.apache.spark.ml.mmlspark.SparkInternals
import org.apache.spark.ml.mmlspark.SparkInternals.Logging
import org.apache.spark.sql.{Row, RuntimeConfig}

/** A setting that is on, off, or, at `auto`, decided by the device a run is on: on a GPU (CUDA) on,
  * on a CPU off. Read from Spark settings as `auto`, `true` or `false` (any case).
  */
sealed abstract class DeviceSwitch(val text: String) extends Serializable {

  /** Whether the setting is on for a run on `device`. */
  def on(device: Device): Boolean
}

object DeviceSwitch {
  case object On extends DeviceSwitch("true") { def on(device: Device): Boolean = true }
  case object Off extends DeviceSwitch("false") { def on(device: Device): Boolean = false }

  /** On for a CUDA device, off on the CPU: the rule of pinned outputs, which the benchmark protocol
    * (bench/README.md) measured no faster on two CPU cores and which spare a device allocation per
    * run on a GPU. The inference service's `auto` has its own rule ([[ServiceSettings.served]]).
    */
  case object Auto extends DeviceSwitch("auto") {
    def on(device: Device): Boolean = device match {
      case Cuda(_) => true
      case Cpu => false
    }
  }

  val values: Seq[DeviceSwitch] = Seq(Auto, On, Off)

  /** The switch written `text` (trimmed, any case), if it is one. */
  def parse(text: String): Option[DeviceSwitch] = {
    val word = text.trim.toLowerCase(java.util.Locale.ROOT)
    values.find(_.text == word)
  }
}

/** How [[ONNXModel]] hands its runs to the executor's [[InferenceService]], from Spark settings
  * read on the driver when the transform is planned.
  *
  * @param enabled
  *   whether runs go through the service (`spark.mmlspark.onnx.inferenceService`: auto, true or
  *   false; default auto, see [[served]]); off, each task runs its own batches on the session it
  *   shares with the other tasks. On two CPU cores (bench/results/summary.md, 2026-11-27) the
  *   protocol measured the service on / off at 0.96-1.00 (ResNet-50 1.00, tiny CNN 0.96, end to end
  *   640x480 0.99, 12 MP photos 0.96), not at least 1.0 on every workload, so `auto` leaves it off
  *   there, except where `autoOnCpu` says the stage's workload measured otherwise; on a GPU it
  *   measured slower on every workload (bench/results/gpu-variants.md), so `auto` leaves it off
  * @param maxWaitNanos
  *   how long the service waits for rows of other tasks to fill a batch that one task left short
  *   (`spark.mmlspark.onnx.inferenceService.maxWait`, default 2ms); it never waits while only one
  *   task uses it
  * @param batchesInFlight
  *   how many batches a task hands over before it waits for the first one's results
  *   (`spark.mmlspark.onnx.inferenceService.batchesInFlight`, default 2): while the service runs
  *   one, the task reads, decodes and transforms the rows of the next
  * @param padBatches
  *   whether a batch shorter than a full run is padded with zero rows to the full size
  *   (`spark.mmlspark.onnx.padBatches`, default false), so that a GPU graph sees one batch shape
  *   and is not planned again for the last, partial batch; the padding rows' outputs are dropped
  * @param pinOutputs
  *   whether outputs of a declared shape are written into reused buffers ([[OutputBuffers]],
  *   `spark.mmlspark.onnx.pinOutputs`: auto, true or false; default auto, on for a CUDA device and
  *   off on the CPU, where the protocol measured pinned / unpinned at 0.90-1.01: ResNet-50 1.01,
  *   tiny CNN 0.90); off, ONNX Runtime allocates each run's outputs, as it does for outputs of no
  *   fixed shape
  * @param autoOnCpu
  *   what `auto` means for the service on a CPU: on for a stage whose own workload the protocol
  *   measured faster with the service there ([[mmlspark.detection.ObjectDetector]]: a detector's
  *   decode and letterbox overlap its runs), off otherwise; not a Spark setting
  */
final case class ServiceSettings(
    enabled: DeviceSwitch,
    maxWaitNanos: Long,
    batchesInFlight: Int,
    padBatches: Boolean = false,
    pinOutputs: DeviceSwitch = DeviceSwitch.Auto,
    autoOnCpu: Boolean = false
) {

  /** Whether runs on `device` go through the service: `auto` is off on a GPU, where tasks running
    * their own batches measured faster (bench/results/gpu-variants.md, an H200 with 16 task
    * threads: service on / off 0.64 for ResNet-50 tensors, 0.58 for a tiny CNN, 0.20 for 12 MP
    * photos), and off on a CPU unless `autoOnCpu`.
    */
  def served(device: Device): Boolean = (enabled, device) match {
    case (DeviceSwitch.Auto, Cpu) => autoOnCpu
    case (DeviceSwitch.Auto, Cuda(_)) => false
    case (switch, _) => switch.on(device)
  }
}

object ServiceSettings {
  val EnabledKey = "spark.mmlspark.onnx.inferenceService"
  val MaxWaitKey = "spark.mmlspark.onnx.inferenceService.maxWait"
  val BatchesInFlightKey = "spark.mmlspark.onnx.inferenceService.batchesInFlight"
  val PadBatchesKey = "spark.mmlspark.onnx.padBatches"
  val PinOutputsKey = "spark.mmlspark.onnx.pinOutputs"

  val default: ServiceSettings = ServiceSettings(enabled = DeviceSwitch.Auto, 2000000L, 2)

  /** The settings in `conf`, checked: a misconfiguration fails on the driver, naming the setting.
    */
  def from(conf: RuntimeConfig): ServiceSettings = {
    def read[T](key: String, default: String, what: String)(parse: String => T): T = {
      val text = conf.get(key, default).trim
      try parse(text)
      catch {
        case NonFatal(_) => throw new IllegalArgumentException(s"$key must be $what, not '$text'")
      }
    }
    def flag(key: String, default: String): Boolean =
      read(key, default, "true or false")(_.toLowerCase match {
        case "true" => true
        case "false" => false
      })
    val switches = DeviceSwitch.values.map(_.text)
    def switch(key: String): DeviceSwitch =
      read(key, DeviceSwitch.Auto.text, s"${switches.init.mkString(", ")} or ${switches.last}")(
        DeviceSwitch.parse(_).get
      )
    val enabled = switch(EnabledKey)
    val maxWaitMicros = read(MaxWaitKey, "2ms", "a duration from 0 to 10s such as 2ms or 500us") {
      t =>
        // A bare number is milliseconds, as in Spark's own time settings.
        val micros =
          if (t.nonEmpty && t.forall(_.isDigit)) t.toLong * 1000L
          else SparkInternals.timeStringAs(t, TimeUnit.MICROSECONDS).longValue
        require(micros >= 0 && micros <= 10000000L)
        micros
    }
    val inFlight = read(BatchesInFlightKey, "2", "a whole number from 1 to 16")(t => {
      val n = t.toInt
      require(n >= 1 && n <= 16)
      n
    })
    ServiceSettings(
      enabled,
      maxWaitMicros * 1000L,
      inFlight,
      padBatches = flag(PadBatchesKey, "false"),
      pinOutputs = switch(PinOutputsKey)
    )
  }
}

/** One task's share of a service: the rows it handed over are dropped once it has ended (killed,
  * failed, or done), so a cancelled job frees its places in the queue.
  */
private[onnx] final class ServiceTicket {
  @volatile var ended = false
}

/** Rows of one task, all of the same per-row input shapes, handed to the service to be run (with
  * rows of other tasks where they fit one batch). The task waits for [[await]].
  */
private[onnx] final class ServiceRequest(
    val plan: RunPlan,
    val rows: IndexedSeq[Row],
    val shapes: Seq[Seq[Long]],
    val ticket: ServiceTicket
) {
  val results = new Array[Either[String, Array[Any]]](rows.length)
  private val done = new CountDownLatch(1)
  @volatile private var failure: Throwable = _

  private[onnx] def complete(): Unit = done.countDown()

  private[onnx] def fail(e: Throwable): Unit = {
    failure = e
    done.countDown()
  }

  /** The results, once the service has run the rows; a killed task stops waiting at once. */
  def await(): Array[Either[String, Array[Any]]] = {
    val task = Option(TaskContext.get())
    while (!done.await(50, TimeUnit.MILLISECONDS))
      task.filter(_.isInterrupted()).foreach { t =>
        throw new TaskKilledException(s"task ${t.taskAttemptId()} was killed")
      }
    if (failure != null)
      throw new IllegalStateException(
        s"the inference service failed: ${failure.getMessage}",
        failure
      )
    results
  }
}

/** The inference service of one (model content, device, settings) in this JVM: its worker threads
  * alone call `OrtSession.run` for every task of the executor that runs the model. On a GPU there
  * is one worker, so one thread calls the session; on a CPU there are as many as the executor's
  * cores allow for the session's intra-op threads (each run on its own core scales better on small
  * models than one run spread over all cores). Tasks hand rows through a bounded queue; a worker
  * takes a request, adds the requests of other tasks queued behind it while they fit one batch
  * (same plan, same per-row shapes, at most `miniBatchSize` rows and the byte budget), runs the
  * batch, and gives each task its rows' results. One worker at a time fills a batch, so rows of
  * several tasks meet in one. A failed batch is run again row by row, so only the rows the model
  * rejects get an error, as in a task's own runs.
  *
  * The service holds the session only while it runs a batch; tasks hold it (through
  * [[OrtSessions]]) while they run, so sessions close when idle exactly as before. It stops after
  * the session idle timeout with no task and no request, and frees its input buffers whenever no
  * task uses it.
  */
private[onnx] final class InferenceService(val key: SessionKey, val workers: Int) extends Logging {

  private val queue = new LinkedBlockingQueue[ServiceRequest](InferenceService.QueueCapacity)
  private val filling = new Object // held by the worker that fills a batch
  @volatile private var dead: Option[Throwable] = None
  @volatile private var retired = false

  // Guarded by InferenceService (the registry's lock).
  private[onnx] var holders = 0
  private[onnx] var idleSince = System.nanoTime()

  private val threads = (0 until workers).map { i =>
    val t = new Thread(
      () => serve(),
      s"mmlspark-onnx-inference-${key.modelHash.take(8)}-${key.device}-$i"
    )
    t.setDaemon(true)
    t
  }

  private[onnx] def start(): Unit = threads.foreach(_.start())

  private[onnx] def queued: Int = queue.size()

  /** Whether only one task uses the service now: then no other rows can come to fill a batch. */
  private def alone: Boolean = InferenceService.synchronized(holders <= 1)

  /** Queues `request`, waiting while the queue is full; a killed task stops waiting. */
  def submit(request: ServiceRequest): Unit = {
    val task = Option(TaskContext.get())
    while (!queue.offer(request, 50, TimeUnit.MILLISECONDS)) {
      dead.foreach(e => throw new IllegalStateException("the inference service stopped", e))
      task.filter(_.isInterrupted()).foreach { t =>
        throw new TaskKilledException(s"task ${t.taskAttemptId()} was killed")
      }
    }
    dead.foreach { e =>
      if (queue.remove(request)) throw new IllegalStateException("the inference service stopped", e)
    }
  }

  /** One worker: takes and fills batches (one worker at a time) and runs them (all at once). */
  private def serve(): Unit = {
    val runners = new java.util.HashMap[Any, BatchRunner]() // this worker's buffers, by plan
    def runner(plan: RunPlan): BatchRunner =
      runners.computeIfAbsent(plan.batchKey, _ => new BatchRunner(plan, key))
    def releaseBuffers(): Unit = runners.values().forEach(_.release())
    var carried: ServiceRequest = null
    try {
      while (!retired && dead.isEmpty) {
        val batch = filling.synchronized {
          val first =
            if (carried != null) carried
            else queue.poll(InferenceService.PollMs, TimeUnit.MILLISECONDS)
          carried = null
          if (first == null) None
          else if (first.ticket.ended) {
            first.fail(InferenceService.taskEnded)
            Some(Nil)
          } else {
            val batch = ArrayBuffer(first)
            var rows = first.rows.length
            val limit = math.min(first.plan.batchSize, runner(first.plan).rowsPerRun(first.shapes))
            val deadline = System.nanoTime() + (if (alone) 0L else first.plan.service.maxWaitNanos)
            var open = rows < limit
            while (open) {
              var next = queue.poll()
              if (next == null) {
                val left = deadline - System.nanoTime()
                if (left > 0) next = queue.poll(left, TimeUnit.NANOSECONDS)
              }
              if (next == null) open = false
              else if (next.ticket.ended) next.fail(InferenceService.taskEnded)
              else if (
                next.plan.batchKey == first.plan.batchKey && next.shapes == first.shapes &&
                rows + next.rows.length <= limit
              ) {
                batch += next
                rows += next.rows.length
                open = rows < limit
              } else {
                carried = next // first in line for this worker's next batch
                open = false
              }
            }
            Some(batch.toSeq)
          }
        }
        batch match {
          case None =>
            if (InferenceService.retireIfIdle(this)) retired = true
            else if (InferenceService.synchronized(holders == 0)) releaseBuffers()
          case Some(Nil) =>
          case Some(requests) => run(requests, runner(requests.head.plan))
        }
      }
      Option(carried).foreach(_.fail(InferenceService.taskEnded))
    } catch {
      case e: Throwable =>
        dead = Some(e)
        logError(s"the inference service for ${key.modelHash.take(12)} on ${key.device} stopped", e)
        InferenceService.remove(this)
        Option(carried).foreach(_.fail(e))
        var left = queue.poll()
        while (left != null) {
          left.fail(e)
          left = queue.poll()
        }
    } finally releaseBuffers()
  }

  /** Runs the rows of `batch` (requests of one plan and shapes) as one batch, split to the byte
    * budget, and completes each request with its rows' results.
    */
  private def run(batch: Seq[ServiceRequest], runner: BatchRunner): Unit = {
    val plan = batch.head.plan
    val rows = batch.flatMap(_.rows).toIndexedSeq
    val results = new Array[Either[String, Array[Any]]](rows.length)
    InferenceService.batches.incrementAndGet()
    InferenceService.largest.accumulateAndGet(rows.length, math.max)
    try {
      val session = OrtSessions.acquire(key, plan.source)
      val runs = OrtRuns.forBatch(batch.map(_.ticket))
      try runner.runAll(session, runs, rows, batch.head.shapes, results)
      finally {
        runs.close()
        OrtSessions.release(key)
      }
      var at = 0
      batch.foreach { request =>
        System.arraycopy(results, at, request.results, 0, request.rows.length)
        at += request.rows.length
        request.complete()
      }
    } catch {
      case e: InterruptedException => batch.foreach(_.fail(e)); throw e
      case e: VirtualMachineError => batch.foreach(_.fail(e)); throw e
      case NonFatal(e) => batch.foreach(_.fail(e))
    }
  }

}

/** The inference services of this JVM, one per session key and worker count (a JVM that hosts local
  * sessions of different sizes one after the other gets a service of the right size for each),
  * created when a task first needs one.
  */
private[onnx] object InferenceService extends Logging {

  private[onnx] val QueueCapacity = 1024
  private val PollMs = 200L
  private val services = new ConcurrentHashMap[(SessionKey, Int), InferenceService]()

  private def taskEnded = new IllegalStateException("the task that handed over these rows ended")

  private def idleTimeoutMs: Long =
    SparkInternals.executorConf
      .map(_.getTimeAsMs("spark.mmlspark.onnx.sessionIdleTimeout", "60s"))
      .getOrElse(60000L)

  private[onnx] val batches = new AtomicLong()
  private[onnx] val largest = new AtomicInteger()

  /** Services running now. */
  def running: Int = services.size()

  /** Batches the services of this JVM have run since it started. */
  def batchesRun: Long = batches.get()

  /** The most rows one batch has held since the last [[resetLargestBatch]]. */
  def largestBatch: Int = largest.get()

  def resetLargestBatch(): Unit = largest.set(0)

  /** The workers of the service for `key`, if it runs. */
  def workersOf(key: SessionKey): Seq[Int] = {
    val found = Seq.newBuilder[Int]
    services.forEach((k, s) => if (k._1 == key) found += s.workers)
    found.result()
  }

  /** Requests queued now in all services. */
  def queued: Int = {
    var n = 0
    services.values().forEach(s => n += s.queued)
    n
  }

  /** The service for `key` for the running task: held until the task ends, when the rows it still
    * has queued are dropped.
    */
  def forTask(key: SessionKey, workers: Int): (InferenceService, ServiceTicket) = {
    val service = synchronized {
      val s = services.computeIfAbsent(
        (key, workers),
        k => {
          val created = new InferenceService(k._1, k._2)
          created.start()
          created
        }
      )
      s.holders += 1
      s
    }
    val ticket = new ServiceTicket
    Option(TaskContext.get()) match {
      case Some(task) =>
        task.addTaskCompletionListener[Unit] { _ =>
          ticket.ended = true
          release(service)
        }
      case None => release(service) // driver code: nothing else would
    }
    (service, ticket)
  }

  private def release(service: InferenceService): Unit = synchronized {
    service.holders -= 1
    if (service.holders == 0) service.idleSince = System.nanoTime()
  }

  /** Called by a service with nothing queued: removes it if no task has used it for the idle
    * timeout, and says whether it did.
    */
  private def retireIfIdle(service: InferenceService): Boolean = synchronized {
    val idle = service.holders == 0 &&
      System.nanoTime() - service.idleSince >= idleTimeoutMs * 1000000L
    if (idle) services.remove((service.key, service.workers), service)
    idle
  }

  private def remove(service: InferenceService): Unit = synchronized {
    services.remove((service.key, service.workers), service)
  }
}
