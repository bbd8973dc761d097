package mmlspark.onnx

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import ai.onnxruntime.{OnnxTensor, OrtSession}
import mmlspark.contracts.RowResults
import org.apache.spark.TaskContext
import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.expressions.GenericRow

/** Everything an executor needs to run an [[ONNXModel]] over a partition: resolved on the driver by
  * `transformSchema`'s checks, shipped with the task.
  *
  * @param softMax
  *   (index into `fetches`, new column) pairs
  * @param argMax
  *   (index into `fetches`, new column) pairs
  */
final case class RunPlan(
    source: ModelSource,
    feeds: Seq[Feed],
    fetches: Seq[(String, TensorSpec, ElementType)],
    softMax: Seq[(Int, String)],
    argMax: Seq[(Int, String)],
    batchSize: Int,
    deviceType: String,
    settings: SessionSettings,
    asVector: Boolean
) {

  private def fetchNames: java.util.Set[String] = fetches.map(_._2.name).toSet.asJava

  /** The output rows of a partition: each input row, its outputs and its error, in input order. */
  def run(rows: Iterator[Row]): Iterator[Row] = {
    if (!rows.hasNext) return Iterator.empty // no session for an empty partition
    val cuda = deviceType != "cpu" && Device.cudaAvailable
    val device = Device.select(deviceType, Device.taskGpus, cuda)
    val threads =
      if (settings.intraOpThreads > 0) settings.intraOpThreads
      else
        Option(TaskContext.get())
          .map(t => math.max(1, t.cpuAmount().setScale(0, BigDecimal.RoundingMode.CEILING).toInt))
          .getOrElse(1)
    val key = SessionKey(source.hash, device, settings.copy(intraOpThreads = threads))
    val session = OrtSessions.acquireForTask(key, source)
    val batch = new TensorBatch(feeds, batchSize)
    rows.grouped(batchSize).flatMap(group => runGroup(session, batch, group))
  }

  private def runGroup(session: OrtSession, batch: TensorBatch, rows: Seq[Row]): Seq[Row] = {
    val results = new Array[Either[String, Array[Any]]](rows.length)
    val shapes = rows.map { row =>
      try
        Right(feeds.map { f =>
          val value = row.get(f.ordinal)
          if (value == null)
            throw new IllegalArgumentException(s"input column '${f.column}' is null")
          f.rowShape(value)
        })
      catch { case NonFatal(e) => Left(RowResults.describe(e)) }
    }
    // Rows of equal shapes run together; a row that cannot be fed only fails itself.
    var i = 0
    while (i < rows.length) shapes(i) match {
      case Left(error) =>
        results(i) = Left(error)
        i += 1
      case Right(shape) =>
        var j = i + 1
        while (j < rows.length && shapes(j) == shapes(i)) j += 1
        runRows(session, batch, rows, i until j, shape, results)
        i = j
    }
    rows.indices.map(k => outputRow(rows(k), results(k)))
  }

  /** Runs rows `indices` as one batch; if the run fails, runs them one by one so that only the rows
    * the model rejects get an error.
    */
  private def runRows(
      session: OrtSession,
      batch: TensorBatch,
      rows: Seq[Row],
      indices: Range,
      shapes: Seq[Seq[Long]],
      results: Array[Either[String, Array[Any]]]
  ): Unit =
    try {
      val values = execute(session, batch, indices.map(rows), shapes)
      indices.zip(values).foreach { case (k, v) => results(k) = Right(v) }
    } catch {
      case NonFatal(_) if indices.length > 1 =>
        indices.foreach(k => runRows(session, batch, rows, k to k, shapes, results))
      case NonFatal(e) => results(indices.head) = Left(RowResults.describe(e))
    }

  private def execute(
      session: OrtSession,
      batch: TensorBatch,
      rows: Seq[Row],
      shapes: Seq[Seq[Long]]
  ): Seq[Array[Any]] = {
    val n = rows.length
    batch.reserve(n, shapes)
    feeds.indices.foreach { f =>
      val count = shapes(f).product
      var k = 0
      while (k < n) {
        batch.fill(f, k, count, rows(k).get(feeds(f).ordinal))
        k += 1
      }
    }
    val env = OrtSessions.environment
    val tensors = new java.util.HashMap[String, OnnxTensor]()
    try {
      feeds.indices.foreach { f =>
        val batched = feeds(f).spec.batchDim.isDefined
        tensors.put(feeds(f).spec.name, batch.tensor(env, f, n, shapes(f), batched))
      }
      val result = session.run(tensors, fetchNames)
      try {
        val perOutput = fetches.map { case (_, spec, element) =>
          Outputs.perRow(result.get(spec.name).get(), spec, element, n, asVector)
        }
        (0 until n).map(k => perOutput.map(_(k)).toArray)
      } finally result.close()
    } finally tensors.values().forEach(_.close())
  }

  private def outputRow(input: Row, result: Either[String, Array[Any]]): Row = {
    val width = input.length
    val out = new Array[Any](width + fetches.length + softMax.length + argMax.length + 1)
    var i = 0
    while (i < width) { out(i) = input.get(i); i += 1 }
    result match {
      case Right(values) =>
        System.arraycopy(values, 0, out, width, values.length)
        var at = width + values.length
        softMax.foreach { case (k, _) => out(at) = Outputs.softMax(values(k)); at += 1 }
        argMax.foreach { case (k, _) => out(at) = Outputs.argMax(values(k)); at += 1 }
      case Left(error) => out(out.length - 1) = error
    }
    new GenericRow(out)
  }
}
