package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, Encoders, Row}
import org.apache.spark.sql.types.{ArrayType, StructField, StructType}

/** The inverse of [[MiniBatchTransformer]]: each batch row becomes one row per element, element `i`
  * of every array column going to row `i`. Columns that are not arrays (added after batching) are
  * repeated on each of the batch's rows. If a batch's arrays differ in length, it yields as many
  * rows as its longest array, with nulls where a shorter one ends; a null array counts as empty.
  */
final class FlattenBatch(override val uid: String) extends Transformer with StageWritable {

  def this() = this(Identifiable.randomUID("FlattenBatch"))

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(
      this,
      schema.fields.exists(_.dataType.isInstanceOf[ArrayType]),
      s"input must have at least one array column but has only ${schema.simpleString}"
    )
    StructType(schema.fields.map { f =>
      f.dataType match {
        case ArrayType(element, _) => StructField(f.name, element, nullable = true, f.metadata)
        case _ => f
      }
    })
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val outSchema = transformSchema(dataset.schema)
    val isArray = dataset.schema.fields.map(_.dataType.isInstanceOf[ArrayType])
    val width = isArray.length
    dataset
      .toDF()
      .mapPartitions { batches: Iterator[Row] =>
        batches.flatMap { batch =>
          val arrays = Array.tabulate(width)(i =>
            if (isArray(i) && !batch.isNullAt(i)) batch.getSeq[Any](i) else null
          )
          val length = arrays.iterator.filter(_ != null).map(_.length).foldLeft(0)(math.max)
          Iterator.tabulate(length) { r =>
            Row.fromSeq(
              Array
                .tabulate(width) { i =>
                  if (!isArray(i)) batch.get(i)
                  else if (arrays(i) == null || r >= arrays(i).length) null
                  else arrays(i)(r)
                }
                .toIndexedSeq
            )
          }
        }
      }(Encoders.row(outSchema))
  }

  override def copy(extra: ParamMap): FlattenBatch = defaultCopy(extra)
}

object FlattenBatch extends StageReadable[FlattenBatch]
