package mmlspark.stages

import java.util.concurrent.LinkedBlockingQueue

import org.apache.spark.TaskContext
import org.apache.spark.ml.mmlspark.SparkInternals
import org.apache.spark.sql.Row

/** Reads a partition's rows on a thread of its own, up to `capacity` rows ahead of the consumer, so
  * that the stages before a batching stage keep producing while the stages after it work. The
  * reading thread runs as the task (what it calls sees `TaskContext.get`) and stops when the task
  * ends; a failure there is thrown to the consumer, after the rows read before it.
  */
private[stages] final class ReadAhead(rows: Iterator[Row], capacity: Int) extends Iterator[Row] {
  import ReadAhead._

  private val queue = new LinkedBlockingQueue[AnyRef](math.max(1, capacity))
  private var head: AnyRef = _

  private val task = TaskContext.get()

  private val reader = {
    val thread = new Thread(
      () =>
        try
          SparkInternals.asTask(task) {
            while (rows.hasNext) queue.put(rows.next())
            queue.put(End)
          }
        catch {
          case _: InterruptedException => // the task ended: nobody reads on
          case t: Throwable =>
            // The consumer reads the rows before it, then the failure; a task that ended
            // interrupts the wait for room.
            try queue.put(Failed(t))
            catch { case _: InterruptedException => }
        },
      s"mmlspark-read-ahead-${Option(task).map(_.taskAttemptId()).getOrElse(-1L)}"
    )
    thread.setDaemon(true)
    thread
  }
  reader.start()
  Option(task).foreach(_.addTaskCompletionListener[Unit](_ => reader.interrupt()))

  override def hasNext: Boolean = {
    if (head == null) head = queue.take()
    head match {
      case End => false
      case Failed(t) => throw t
      case _ => true
    }
  }

  override def next(): Row = {
    if (!hasNext) throw new NoSuchElementException("no rows left")
    val row = head.asInstanceOf[Row]
    head = null
    row
  }

  /** The next row if it has been read already; none if the reader has not got that far (or the rows
    * have ended).
    */
  def ready(): Option[Row] = {
    if (head == null) head = queue.poll()
    head match {
      case null | End | Failed(_) => None
      case row: Row =>
        head = null
        Some(row)
    }
  }
}

private[stages] object ReadAhead {
  private case object End
  private final case class Failed(error: Throwable)
}
