package mmlspark.stages

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{DataFrame, Dataset, Encoders, Row}
import org.apache.spark.sql.types.{ArrayType, StructField, StructType}

/** The batching the mini-batch transformers share: every column becomes an array column holding one
  * batch's values, in row order.
  */
private[stages] object MiniBatching {

  def batchSchema(schema: StructType): StructType =
    StructType(
      schema.fields.map(f =>
        StructField(f.name, ArrayType(f.dataType, f.nullable), nullable = false)
      )
    )

  /** Groups each partition's rows into batches; `closes(rowsSoFar, batchStartNanos)` says when the
    * batch being filled is complete. With `readAhead` > 0 the rows are read on a thread of their
    * own, up to that many ahead ([[ReadAhead]]).
    */
  def batch(dataset: Dataset[_], closes: (Int, Long) => Boolean, readAhead: Int = 0): DataFrame =
    batches(dataset) { input =>
      val rows = if (readAhead > 0) new ReadAhead(input, readAhead) else input
      new Iterator[Seq[Row]] {
        override def hasNext: Boolean = rows.hasNext

        override def next(): Seq[Row] = {
          val batch = new ArrayBuffer[Row]()
          val start = System.nanoTime()
          while (rows.hasNext && (batch.isEmpty || !closes(batch.length, start)))
            batch += rows.next()
          batch.toSeq
        }
      }
    }

  /** Each partition's rows in the batches `group` makes of them, as batch rows. */
  def batches(dataset: Dataset[_])(group: Iterator[Row] => Iterator[Seq[Row]]): DataFrame = {
    val df = dataset.toDF()
    val width = df.schema.length
    df.mapPartitions { rows: Iterator[Row] =>
      group(rows).map { batch =>
        val columns = Array.fill(width)(new Array[Any](batch.length))
        var r = 0
        batch.foreach { row =>
          var i = 0
          while (i < width) {
            columns(i)(r) = row.get(i)
            i += 1
          }
          r += 1
        }
        Row.fromSeq(columns.map(_.toSeq).toIndexedSeq)
      }
    }(Encoders.row(batchSchema(df.schema)))
  }
}
