package mmlspark.onnx

import java.util.concurrent.{ConcurrentHashMap, Executors, ThreadFactory, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import ai.onnxruntime.{OnnxTensor, OnnxValue, OrtSession}
import ai.onnxruntime.OrtSession.RunOptions
import org.apache.spark.TaskContext
import org.apache.spark.ml.mmlspark.SparkInternals.Logging

/** The ONNX Runtime runs of one task, or of one batch of the inference service: their `RunOptions`,
  * which terminate them. Created when the first run starts, closed when the task completes (or the
  * batch is done). Its runs are terminated when `killed` says why (the task was killed or
  * cancelled; every task whose rows are in the batch ended), as seen by the [[OrtRuns]] watcher, or
  * when the JVM exits.
  */
final class TaskRuns private[onnx] (killed: () => Option[String]) {
  private val options = new RunOptions()
  private var closed = false
  @volatile private var terminatedBy: String = _

  /** Why these runs should stop now, if they should. */
  private[onnx] def killedBecause: Option[String] = killed()

  /** Why this task's runs were terminated, if they were. */
  def terminated: Option[String] = Option(terminatedBy)

  private[onnx] def runOptions: RunOptions = options

  /** Makes the running call and every later one of this task stop as soon as ONNX Runtime looks
    * (between kernels, and between the iterations of a loop).
    */
  def terminate(why: String): Unit = synchronized {
    if (!closed && terminatedBy == null) {
      terminatedBy = why
      options.setTerminate(true)
    }
  }

  def close(): Unit = synchronized {
    if (!closed) {
      closed = true
      options.close()
    }
  }
}

/** Every `OrtSession.run` of this JVM goes through here, so that none outlives its task or the JVM:
  * a run is registered while in flight; a daemon thread looks every 100 ms for runs whose task was
  * killed (cancelled job, failed stage, speculative copy) and terminates them through their
  * `RunOptions`; and at JVM exit a shutdown hook refuses new runs, terminates those in flight,
  * waits for them to return, and only then closes the sessions and releases ONNX Runtime's
  * environment.
  */
object OrtRuns extends Logging {

  private val inFlight = ConcurrentHashMap.newKeySet[TaskRuns]()
  private var shuttingDown = false // guarded by `this`

  /** How long JVM exit waits for terminated runs to return. */
  private val exitWaitMs = 10000L

  /** Whether the JVM is exiting (no new run starts). */
  def exiting: Boolean = synchronized(shuttingDown)

  /** Runs in flight now. */
  def running: Int = inFlight.size()

  /** The runs of the running task (or of the calling thread, outside a task), released with it. */
  def forTask(): TaskRuns = {
    OrtSessions.environment // installs this object
    Option(TaskContext.get()) match {
      case Some(t) =>
        val runs = new TaskRuns(() =>
          if (t.isInterrupted()) Some(s"task ${t.taskAttemptId()} was killed") else None
        )
        t.addTaskCompletionListener[Unit](_ => runs.close())
        runs
      case None => new TaskRuns(() => None)
    }
  }

  /** The runs of one batch of the inference service, terminated once every task in `tickets` has
    * ended; the caller closes them.
    */
  private[onnx] def forBatch(tickets: Seq[ServiceTicket]): TaskRuns = {
    OrtSessions.environment
    new TaskRuns(() =>
      if (tickets.forall(_.ended)) Some("every task whose rows were in the batch ended") else None
    )
  }

  /** `session.run` for the task of `runs`, terminated if the task is killed or the JVM exits. */
  def run(
      runs: TaskRuns,
      session: OrtSession,
      inputs: java.util.Map[String, OnnxTensor],
      outputs: java.util.Set[String],
      pinned: java.util.Map[String, OnnxValue] = java.util.Collections.emptyMap()
  ): OrtSession.Result = {
    synchronized {
      if (shuttingDown)
        throw new IllegalStateException("the JVM is exiting: no new ONNX Runtime runs start")
      inFlight.add(runs)
    }
    try {
      check(runs)
      if (pinned.isEmpty) session.run(inputs, outputs, runs.runOptions)
      else session.run(inputs, outputs, pinned, runs.runOptions)
    } finally {
      inFlight.remove(runs)
      synchronized(notifyAll())
    }
  }

  private def check(runs: TaskRuns): Unit = runs.killedBecause.foreach(runs.terminate)

  /** Starts the watcher and the exit hook; called once the ONNX Runtime environment exists. */
  private[onnx] def install(): Unit = started

  // ONNX Runtime's Java API releases its environment in a shutdown hook of its own, which the JVM
  // runs at the same time as every other: under a run still in flight (or one being terminated,
  // which logs through the released environment), it crashes the JVM. That hook is taken out and
  // run by ours, after the runs have stopped. Reading the JVM's hook table needs
  // --add-opens java.base/java.lang, which Spark requires anyway; without it, nothing changes.
  @volatile private var environmentCloser: Option[Thread] = None

  private def takeOverEnvironmentCloser(): Unit =
    try {
      val hooksClass = Class.forName("java.lang.ApplicationShutdownHooks")
      val field = hooksClass.getDeclaredField("hooks")
      field.setAccessible(true)
      def task(t: Thread): Option[AnyRef] = {
        def read(owner: AnyRef, cls: Class[_], name: String): Option[AnyRef] =
          scala.util.Try(cls.getDeclaredField(name)).toOption.map { f =>
            f.setAccessible(true)
            f.get(owner)
          }
        read(t, classOf[Thread], "target") // JDK 17
          .orElse(
            read(t, classOf[Thread], "holder").flatMap(h => read(h, h.getClass, "task"))
          ) // JDK 19 and later
          .flatMap(Option(_))
      }
      val closers = hooksClass.synchronized {
        val hooks = field.get(null).asInstanceOf[java.util.Map[Thread, Thread]]
        hooks.keySet.asScala.toSeq.filter(
          task(_).exists(_.getClass.getName == "ai.onnxruntime.OrtEnvironment$OrtEnvCloser")
        )
      }
      closers.foreach(Runtime.getRuntime.removeShutdownHook)
      environmentCloser = closers.headOption
    } catch {
      case NonFatal(e) =>
        logWarning(s"cannot order ONNX Runtime's exit after running calls end: $e")
    }

  private lazy val started: Unit = {
    takeOverEnvironmentCloser()
    val watcher = Executors.newSingleThreadScheduledExecutor(new ThreadFactory {
      def newThread(r: Runnable): Thread = {
        val t = new Thread(r, "mmlspark-onnx-run-watcher")
        t.setDaemon(true)
        t
      }
    })
    watcher.scheduleWithFixedDelay(() => inFlight.forEach(check), 100, 100, TimeUnit.MILLISECONDS)
    Runtime.getRuntime.addShutdownHook(new Thread(() => exit(), "mmlspark-onnx-exit"))
  }

  /** At JVM exit: terminates the runs in flight, waits for them, then closes the sessions. */
  private[onnx] def exit(): Unit = {
    synchronized { shuttingDown = true }
    inFlight.forEach(_.terminate("the JVM is exiting"))
    val deadline = System.currentTimeMillis() + exitWaitMs
    val drained = synchronized {
      while (!inFlight.isEmpty && System.currentTimeMillis() < deadline)
        wait(math.max(1L, deadline - System.currentTimeMillis()))
      inFlight.isEmpty
    }
    // A session closed under a running call would crash the JVM; one still running is left open.
    if (drained) {
      OrtSessions.closeAll()
      environmentCloser.foreach(_.run()) // the hook's own code, in this thread
    } else
      logWarning(s"${inFlight.size()} ONNX Runtime runs did not stop within ${exitWaitMs} ms")
  }
}
