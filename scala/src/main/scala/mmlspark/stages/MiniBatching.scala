package mmlspark.stages

import scala.collection.mutable.ArrayBuffer

import org.apache.spark.sql.{DataFrame, Dataset, Encoders, Row}
import org.apache.spark.sql.types.{ArrayType, StructField, StructType}

/** The batching both mini-batch transformers share: every column becomes an array column holding
  * one batch's values, in row order.
  */
private[stages] object MiniBatching {

  def batchSchema(schema: StructType): StructType =
    StructType(
      schema.fields.map(f =>
        StructField(f.name, ArrayType(f.dataType, f.nullable), nullable = false)
      )
    )

  /** Groups each partition's rows into batches; `closes(rowsSoFar, batchStartNanos)` says when the
    * batch being filled is complete.
    */
  def batch(dataset: Dataset[_], closes: (Int, Long) => Boolean): DataFrame = {
    val df = dataset.toDF()
    val width = df.schema.length
    df.mapPartitions { rows: Iterator[Row] =>
      new Iterator[Row] {
        override def hasNext: Boolean = rows.hasNext

        override def next(): Row = {
          val columns = Array.fill(width)(new ArrayBuffer[Any]())
          val start = System.nanoTime()
          var count = 0
          while (rows.hasNext && (count == 0 || !closes(count, start))) {
            val row = rows.next()
            var i = 0
            while (i < width) {
              columns(i) += row.get(i)
              i += 1
            }
            count += 1
          }
          Row.fromSeq(columns.map(_.toSeq).toIndexedSeq)
        }
      }
    }(Encoders.row(batchSchema(df.schema)))
  }
}
