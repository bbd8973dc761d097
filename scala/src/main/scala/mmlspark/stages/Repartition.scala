package mmlspark.stages

import mmlspark.contracts.{StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.{BooleanParam, IntParam, ParamMap, ParamValidators}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.types.StructType

/** Redistributes rows evenly over `n` partitions (a shuffle); passes data through unchanged when
  * `disable` is true, so a pipeline can keep the stage and switch it off.
  */
final class Repartition(override val uid: String) extends Transformer with StageWritable {

  def this() = this(Identifiable.randomUID("Repartition"))

  final val n: IntParam =
    new IntParam(
      this,
      "n",
      "number of partitions to redistribute the rows over (at least 1)",
      ParamValidators.gtEq(1)
    )

  final val disable: BooleanParam = new BooleanParam(
    this,
    "disable",
    "pass the data through unchanged instead of repartitioning"
  )

  setDefault(disable -> false)

  def getN: Int = $(n)

  def setN(value: Int): this.type = set(n, value)

  def getDisable: Boolean = $(disable)

  def setDisable(value: Boolean): this.type = set(disable, value)

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
