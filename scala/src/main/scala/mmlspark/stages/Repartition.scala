package mmlspark.stages

import mmlspark.contracts.{StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Redistributes rows evenly over `n` partitions (a shuffle); passes data through unchanged when
  * `disable` is true, so a pipeline can keep the stage and switch it off.
  */
final class Repartition(override val uid: String)
    extends Transformer
    with RepartitionDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("Repartition"))

  setDefault(disable -> false)

  override def transformSchema(schema: StructType): StructType = schema

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema)
    if ($(disable)) dataset.toDF()
    else {
      mmlspark.contracts.SchemaUtils.require(this, isDefined(n), "param 'n' must be set")
      dataset.repartition($(n)).toDF()
    }
  }

  override def copy(extra: ParamMap): Repartition = defaultCopy(extra)
}

object Repartition extends StageReadable[Repartition]
