package mmlspark.stages

import org.apache.spark.TaskContext
import org.apache.spark.sql.Row

import java.util.concurrent.{ArrayBlockingQueue, ConcurrentHashMap, TimeUnit}

/** The executor side of [[PartitionConsolidator]]: per stage of a query, a funnel that the tasks
  * running in this JVM join. The first to join drains it (its own rows, then those the others put
  * in); the others put their rows in and emit none. A task that joins after the drainer left
  * becomes the next drainer.
  */
private[stages] object Consolidation {

  /** The most rows waiting in a funnel; a task putting more waits for the drainer. */
  val Capacity = 1000

  private val PollMillis = 20L

  private val funnels = new ConcurrentHashMap[String, Funnel]()

  def consolidate(key: String, rows: Iterator[Row], graceMillis: Long): Iterator[Row] =
    if (!rows.hasNext) Iterator.empty
    else {
      val context = Option(TaskContext.get())
      val stage = context.map(c => s"${c.stageId()}.${c.stageAttemptNumber()}").getOrElse("")
      val name = s"$key/$stage"
      val funnel = funnels.computeIfAbsent(name, _ => new Funnel(name, graceMillis))
      if (funnel.join()) funnel.drain(rows, context)
      else funnel.hand(rows, context)
    }

  final class Funnel(name: String, graceMillis: Long) {
    private val queue = new ArrayBlockingQueue[Row](Capacity)
    private var workers = 0
    private var draining = false

    /** Registers a task; true when it is to drain the funnel (no task is). */
    def join(): Boolean = synchronized {
      workers += 1
      if (draining) false else { draining = true; true }
    }

    private def takeOver(): Boolean = synchronized {
      if (draining) false else { draining = true; true }
    }

    private def leave(): Unit = synchronized { workers -= 1 }

    /** Whether the drainer may stop: no other task is registered and nothing waits. */
    private def finish(): Boolean = synchronized {
      if (workers == 1 && queue.isEmpty) {
        workers = 0
        draining = false
        funnels.remove(name, this)
        true
      } else false
    }

    /** A task that is not the drainer: puts its rows in and emits none, unless the drainer ends
      * (fails) before they are all in, when it drains the rest itself.
      */
    def hand(rows: Iterator[Row], context: Option[TaskContext]): Iterator[Row] = {
      var left = false
      context.foreach(_.addTaskCompletionListener[Unit](_ => if (!left) leave()))
      while (rows.hasNext) {
        val row = rows.next()
        while (!queue.offer(row, PollMillis, TimeUnit.MILLISECONDS)) {
          if (takeOver()) {
            left = true // the drain accounts for this task from here
            return Iterator.single(row) ++ drain(rows, context)
          }
        }
      }
      left = true
      leave()
      Iterator.empty
    }

    /** The drainer's rows: waiting ones first (they free the tasks putting them), then its own,
      * until no other task is registered, nothing waits and the grace period passed.
      */
    def drain(own: Iterator[Row], context: Option[TaskContext]): Iterator[Row] = new Iterator[Row] {
      private var upcoming: Row = _
      private var done = false
      private var idleSince = -1L
      context.foreach(_.addTaskCompletionListener[Unit] { _ =>
        if (!done) Funnel.this.synchronized {
          done = true
          workers -= 1
          draining = false
        }
      })

      override def hasNext: Boolean = {
        while (upcoming == null && !done) {
          upcoming = queue.poll()
          if (upcoming == null && own.hasNext) upcoming = own.next()
          if (upcoming == null) upcoming = queue.poll(PollMillis, TimeUnit.MILLISECONDS)
          if (upcoming != null) idleSince = -1L
          else {
            val now = System.currentTimeMillis()
            if (idleSince < 0) idleSince = now
            if (now - idleSince >= graceMillis && finish()) done = true
          }
        }
        upcoming != null
      }

      override def next(): Row = {
        if (!hasNext) throw new NoSuchElementException("no more rows")
        val row = upcoming
        upcoming = null
        row
      }
    }
  }
}
