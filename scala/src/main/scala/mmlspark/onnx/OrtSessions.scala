package mmlspark.onnx

import java.io.{File, ObjectInputStream, ObjectOutputStream}
import java.nio.file.{Files, StandardCopyOption}
import java.util.concurrent.{ConcurrentHashMap, Executors, ThreadFactory, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._

import ai.onnxruntime.{OrtEnvironment, OrtLoggingLevel, OrtProvider, OrtSession}
import ai.onnxruntime.OrtSession.SessionOptions
import ai.onnxruntime.OrtSession.SessionOptions.{ExecutionMode, OptLevel}
import ai.onnxruntime.providers.OrtCUDAProviderOptions
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.{SparkEnv, SparkFiles, TaskContext}
import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.json4s.{JArray, JBool, JInt, JObject, JString}
import org.json4s.jackson.JsonMethods.{compact, render}

/** Where an executor finds the model: always a file on local disk in the end, so that ONNX Runtime
  * reads it natively and the JVM heap of an executor never holds the model bytes.
  */
sealed trait ModelSource extends Serializable {

  /** SHA-256 of the model bytes: sessions are shared by content, not by path. */
  def hash: String

  /** A local file with the model, made available once per JVM. */
  def localFile(): String
}

/** Model bytes the driver shipped with `SparkContext.addFile`, once per executor. */
final case class ShippedModel(hash: String, fileName: String) extends ModelSource {
  def localFile(): String = SparkFiles.get(fileName)
}

/** A model at a Hadoop filesystem path, with the external data files it names (relative to its
  * directory), copied to local disk once per executor JVM (local paths are used in place).
  */
final case class HadoopModel(
    hash: String,
    path: String,
    externalData: Seq[String],
    conf: HadoopConf
) extends ModelSource {
  def localFile(): String = HadoopModel.localCopy(this)
}

object HadoopModel {
  private val copies = new ConcurrentHashMap[String, String]()

  // Copies of remote models by content: equal content, interchangeable copies.
  def localCopy(model: HadoopModel): String = {
    val source = new Path(model.path)
    val fs = source.getFileSystem(model.conf.value)
    if (fs.getScheme == "file") new File(fs.makeQualified(source).toUri).getPath
    else
      copies.computeIfAbsent(
        model.hash,
        _ => copyToLocal(fs, source, model.externalData, s"${model.hash}.onnx")
      )
  }

  /** Copies the model at `source` to a new local temporary directory as `name`, with the external
    * data files `externalData` beside it as ONNX Runtime expects them; returns the model's path.
    */
  def copyToLocal(
      fs: org.apache.hadoop.fs.FileSystem,
      source: Path,
      externalData: Seq[String],
      name: String
  ): String = {
    val dir = TempFiles.createDir("mmlspark-onnx").toPath
    def copy(from: Path, to: java.nio.file.Path): Unit = {
      Files.createDirectories(to.getParent)
      val in = fs.open(from)
      try Files.copy(in, to, StandardCopyOption.REPLACE_EXISTING)
      finally in.close()
    }
    copy(source, dir.resolve(name))
    externalData.foreach(l => copy(new Path(source.getParent, l), dir.resolve(l)))
    dir.resolve(name).toString
  }
}

/** Temporary directories of this JVM (model copies, payload files), deleted with their contents
  * when the JVM exits.
  */
object TempFiles {
  private val dirs = ConcurrentHashMap.newKeySet[File]()

  private lazy val cleanup: Unit = Runtime.getRuntime.addShutdownHook(
    new Thread(() => dirs.forEach(d => deleteRecursively(d)), "mmlspark-onnx-temp-cleanup")
  )

  def createDir(prefix: String): File = {
    cleanup
    val dir = Files.createTempDirectory(prefix).toFile
    dirs.add(dir)
    dir
  }

  def deleteRecursively(file: File): Unit = {
    if (file.isDirectory && !Files.isSymbolicLink(file.toPath))
      Option(file.listFiles()).foreach(_.foreach(deleteRecursively))
    file.delete()
  }
}

/** A Hadoop configuration that can travel to executors (Configuration is Writable, not
  * Serializable).
  */
final class HadoopConf(@transient var value: Configuration) extends Serializable {
  private def writeObject(out: ObjectOutputStream): Unit = {
    out.defaultWriteObject()
    value.write(out)
  }
  private def readObject(in: ObjectInputStream): Unit = {
    in.defaultReadObject()
    value = new Configuration(false)
    value.readFields(in)
  }
}

/** The device a session runs on. */
sealed trait Device
case object Cpu extends Device { override def toString = "cpu" }
final case class Cuda(id: Int) extends Device { override def toString = s"cuda:$id" }

object Device {

  def cudaAvailable: Boolean = OrtEnvironment.getAvailableProviders.contains(OrtProvider.CUDA)

  /** The GPU addresses Spark assigned to the running task (none outside a task or without GPU
    * scheduling).
    */
  def taskGpus: Seq[String] = Option(TaskContext.get())
    .flatMap(_.resources().get("gpu"))
    .map(_.addresses.toSeq)
    .getOrElse(Nil)

  /** The device for `deviceType` ("auto", "cpu" or "cuda") in a task that was given the GPUs
    * `gpus`: the first of them (device 0 where Spark schedules no GPUs). `cuda` without the CUDA
    * provider is an error; `auto` then runs on the CPU.
    */
  def select(deviceType: String, gpus: Seq[String], cudaAvailable: Boolean): Device =
    deviceType match {
      case "cpu" => Cpu
      case "cuda" | "auto" if cudaAvailable =>
        val address = gpus.headOption.getOrElse("0")
        Cuda(address.toIntOption.getOrElse {
          throw new IllegalArgumentException(
            s"Spark gave this task GPU address '$address', which is not a CUDA device number"
          )
        })
      case "cuda" =>
        throw new IllegalStateException(
          "deviceType is 'cuda' but the ONNX Runtime on this executor has no CUDA provider " +
            s"(available: ${OrtEnvironment.getAvailableProviders.asScala.mkString(", ")}). Put the " +
            "GPU build (com.microsoft.onnxruntime:onnxruntime_gpu, with CUDA and cuDNN installed) " +
            "on the classpath instead of the CPU build, or set deviceType to 'auto' or 'cpu'"
        )
      case "auto" => Cpu
      case other => throw new IllegalArgumentException(s"unknown deviceType '$other'")
    }

  /** Runs a job of `tasks` tasks and reports, for each, what ONNXModel sees there: a JSON object
    * with the partition, the executor, the GPU addresses Spark assigned to the task, the CUDA
    * device `deviceType` 'cuda' binds it to, whether this executor's ONNX Runtime has the CUDA
    * provider, and when the task ran (epoch milliseconds). A check of a cluster's GPU scheduling.
    */
  def taskAssignments(spark: SparkSession, tasks: Int, holdMillis: Int): Array[String] =
    spark.sparkContext
      .parallelize(0 until tasks, tasks)
      .mapPartitions { _ =>
        val start = System.currentTimeMillis()
        val gpus = taskGpus
        val device =
          if (gpus.isEmpty) "none" else select("cuda", gpus, cudaAvailable = true).toString
        Thread.sleep(holdMillis) // so that tasks overlap and concurrent assignments show
        val task = TaskContext.get()
        Iterator(
          compact(
            render(
              JObject(
                "partition" -> JInt(task.partitionId()),
                "executor" -> JString(SparkEnv.get.executorId),
                "gpus" -> JArray(gpus.map(JString(_)).toList),
                "device" -> JString(device),
                "cudaAvailable" -> JBool(cudaAvailable),
                "start" -> JInt(start),
                "end" -> JInt(System.currentTimeMillis())
              )
            )
          )
        )
      }
      .collect()
}

/** How a session is built, besides its model and device. */
final case class SessionSettings(
    intraOpThreads: Int,
    optimizationLevel: String,
    cudaMemoryLimit: Long,
    cudnnConvAlgoSearch: String,
    tensorRT: Boolean
) {

  def options(device: Device): SessionOptions = {
    val options = new SessionOptions()
    try {
      options.setIntraOpNumThreads(intraOpThreads)
      options.setInterOpNumThreads(1)
      options.setExecutionMode(ExecutionMode.SEQUENTIAL)
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
          if (cudaMemoryLimit > 0) cuda.add("gpu_mem_limit", cudaMemoryLimit.toString)
          cuda.add("cudnn_conv_algo_search", cudnnConvAlgoSearch)
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
    Option(SparkEnv.get)
      .map(_.conf.getTimeAsMs("spark.mmlspark.onnx.sessionIdleTimeout", "60s"))
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
