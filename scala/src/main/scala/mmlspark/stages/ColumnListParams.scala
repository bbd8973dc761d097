package mmlspark.stages

import mmlspark.contracts.{Check, SchemaUtils}
import org.apache.spark.ml.param.{Params, StringArrayParam}
import org.apache.spark.sql.types.{StructField, StructType}

/** The `cols` param of the stages that pick columns by name ([[DropColumns]], [[SelectColumns]]).
  */
private[stages] trait ColumnListParams extends Params {

  /** What the named columns are for, the start of the param's doc ("to drop"). */
  protected def colsPurpose: String

  /** Whether an empty list is a valid value (a no-op for [[DropColumns]], as in SynapseML). */
  protected def emptyAllowed: Boolean = false

  final val cols: StringArrayParam = new StringArrayParam(
    this,
    "cols",
    s"names of the columns $colsPurpose " +
      (if (emptyAllowed) "(no repeats; none leaves the data as it is)"
       else "(at least one, no repeats)"),
    if (emptyAllowed) Check.DistinctNames else Check.All(Check.NotEmpty, Check.DistinctNames)
  )

  def getCols: Array[String] = $(cols)

  def setCols(value: Array[String]): this.type = set(cols, value)

  /** The fields of the named columns in `schema`, in the order named; each must exist. */
  protected def requireCols(schema: StructType): Array[StructField] = {
    SchemaUtils.require(this, isDefined(cols), "param 'cols' must be set")
    $(cols).map(c => SchemaUtils.requireColumn(this, schema, c))
  }
}
