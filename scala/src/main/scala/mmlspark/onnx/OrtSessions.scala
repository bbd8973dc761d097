package mmlspark.onnx

import java.util.concurrent.{ConcurrentHashMap, Executors, ThreadFactory, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import ai.onnxruntime.{OrtEnvironment, OrtLoggingLevel, OrtSession}
import ai.onnxruntime.OrtSession.SessionOptions
import ai.onnxruntime.OrtSession.SessionOptions.{ExecutionMode, OptLevel}
import ai.onnxruntime.providers.OrtCUDAProviderOptions
import org.apache.spark.TaskContext
import org.apache.spark.ml.mmlspark.SparkInternals
import org.apache.spark.ml.mmlspark.SparkInternals.Logging

/** How a session is built, besides its model and device.
  *
  * @param fixedShapes
  *   whether every row has the same input shapes: only then does ONNX Runtime plan memory once for
  *   all runs (its memory patterns); with shapes that vary it is turned off, as a plan per shape
  *   makes a CUDA session's memory grow run after run
  */
final case class SessionSettings(
    intraOpThreads: Int,
    optimizationLevel: String,
    cudaMemoryLimit: Long,
    cudnnConvAlgoSearch: String,
    tensorRT: Boolean,
    fixedShapes: Boolean = true,
    spinning: Boolean = true
) {

  def options(device: Device): SessionOptions = {
    val options = new SessionOptions()
    try {
      options.setIntraOpNumThreads(intraOpThreads)
      options.setInterOpNumThreads(1)
      options.setExecutionMode(ExecutionMode.SEQUENTIAL)
      options.setMemoryPatternOptimization(fixedShapes)
      if (!spinning) options.addConfigEntry("session.intra_op.allow_spinning", "0")
      options.setOptimizationLevel(optimizationLevel match {
        case "none" => OptLevel.NO_OPT
        case "basic" => OptLevel.BASIC_OPT
        case "extended" => OptLevel.EXTENDED_OPT
        case _ => OptLevel.ALL_OPT
      })
      device match {
        case Cuda(id) =>
          if (tensorRT) options.addTensorrt(id)
          val cuda = new OrtCUDAProviderOptions(id)
          CudaOptions
            .of(
              Map(
                "cudnnConvAlgoSearch" -> cudnnConvAlgoSearch,
                "cudaMemoryLimit" -> cudaMemoryLimit
              )
            )
            .foreach { case (option, value) => cuda.add(option, value) }
          options.addCUDA(cuda)
        case Cpu =>
      }
      options
    } catch {
      case e: Throwable =>
        options.close()
        throw e
    }
  }
}

final case class SessionKey(modelHash: String, device: Device, settings: SessionSettings)

/** The ONNX Runtime sessions of this JVM: one per (model content, device, settings), shared by all
  * tasks that run the model concurrently (`OrtSession.run` is thread-safe). A task holds a session
  * from [[acquire]] until it completes; a session no task has held for
  * `spark.mmlspark.onnx.sessionIdleTimeout` seconds (default 60) is closed, freeing its native
  * memory, by a daemon thread of this object.
  */
object OrtSessions extends Logging {

  lazy val environment: OrtEnvironment = {
    val env = OrtEnvironment.getEnvironment(OrtLoggingLevel.ORT_LOGGING_LEVEL_WARNING, "mmlspark")
    OrtNative.removeExtracted()
    OrtRuns.install()
    env
  }

  private final class Entry {
    @volatile var session: OrtSession = _
    var holders = 0
    var idleSince: Long = System.nanoTime()
  }

  private val entries = new ConcurrentHashMap[SessionKey, Entry]()
  private val createdCount = new AtomicLong()

  /** Sessions created in this JVM since it started. */
  def created: Long = createdCount.get()

  /** The keys of the sessions open now. */
  def openKeys: Seq[SessionKey] = synchronized(entries.asScala.collect {
    case (k, e) if e.session != null => k
  }.toSeq)

  private def idleTimeoutMs: Long =
    SparkInternals.executorConf
      .map(_.getTimeAsMs("spark.mmlspark.onnx.sessionIdleTimeout", "60s"))
      .getOrElse(60000L)

  private lazy val reaper = {
    val pool = Executors.newSingleThreadScheduledExecutor(new ThreadFactory {
      def newThread(r: Runnable): Thread = {
        val t = new Thread(r, "mmlspark-onnx-session-reaper")
        t.setDaemon(true)
        t
      }
    })
    val period = math.max(100L, math.min(idleTimeoutMs / 2, 10000L))
    pool.scheduleWithFixedDelay(
      () => closeIdle(idleTimeoutMs),
      period,
      period,
      TimeUnit.MILLISECONDS
    )
    pool
  }

  /** The session for `key`, created from `source` if this JVM has none; the caller must [[release]]
    * it.
    */
  def acquire(key: SessionKey, source: ModelSource): OrtSession = {
    reaper
    val entry = synchronized {
      val e = entries.computeIfAbsent(key, _ => new Entry)
      e.holders += 1
      e
    }
    try {
      entry.synchronized {
        if (entry.session == null) {
          val options = key.settings.options(key.device)
          try entry.session = environment.createSession(source.localFile(), options)
          finally options.close()
          createdCount.incrementAndGet()
          logInfo(
            s"ONNX Runtime session for model ${key.modelHash.take(12)} on ${key.device} " +
              s"(${key.settings.intraOpThreads} intra-op threads)"
          )
        }
        entry.session
      }
    } catch {
      case e: Throwable =>
        release(key)
        throw e
    }
  }

  /** Acquires the session for the running task, released when the task completes. */
  def acquireForTask(key: SessionKey, source: ModelSource): OrtSession = {
    val session = acquire(key, source)
    Option(TaskContext.get()) match {
      case Some(task) => task.addTaskCompletionListener[Unit](_ => release(key))
      case None => release(key) // outside a task (driver code): nothing would release it
    }
    session
  }

  def release(key: SessionKey): Unit = synchronized {
    Option(entries.get(key)).foreach { e =>
      e.holders -= 1
      if (e.holders == 0) {
        e.idleSince = System.nanoTime()
        if (e.session == null) entries.remove(key)
      }
    }
  }

  /** Closes every session (at JVM exit, once no run is in flight). */
  private[onnx] def closeAll(): Unit = {
    val all = synchronized {
      val open = entries.asScala.values.flatMap(e => Option(e.session)).toSeq
      entries.clear()
      open
    }
    all.foreach(_.close())
  }

  /** Closes the sessions no task has held for `idleMs` milliseconds; returns how many. */
  def closeIdle(idleMs: Long): Int = {
    val now = System.nanoTime()
    val idle = synchronized {
      entries.asScala.toSeq.collect {
        case (k, e)
            if e.holders == 0 && e.session != null && now - e.idleSince >= idleMs * 1000000L =>
          entries.remove(k)
          e.session
      }
    }
    idle.foreach(_.close())
    idle.size
  }
}
