package mmlspark.featurize

import mmlspark.contracts.{HasInputCols, HasOutputCols, SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Estimator
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, Dataset}
import org.apache.spark.sql.functions.{avg, isnan, lit, percentile_approx, when}
import org.apache.spark.sql.types.{DoubleType, FloatType, StringType, StructField, StructType}

/** Shared by [[CleanMissingData]] and [[CleanMissingDataModel]]. */
private[featurize] trait CleanMissingDataParams
    extends HasInputCols
    with HasOutputCols
    with CleanMissingDataParamsDecls {

  setDefault(cleaningMode -> CleanMissingData.Mean)

  /** The output columns: `outputCols`, or the input columns themselves (cleaned in place). */
  def outputNames: Seq[String] = if (isDefined(outputCols)) $(outputCols).toSeq else $(inputCols)

  /** Checks the columns and params; the schema with each output column added (or kept, in place).
    */
  protected def cleanedSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(inputCols), FeaturizeMessages.NoInputCols())
    val (ins, outs) = ($(inputCols).toSeq, outputNames)
    SchemaUtils.require(
      this,
      ins.length == outs.length,
      FeaturizeMessages.ColumnCount("inputs" -> ins.length, "outputs" -> outs.length)
    )
    SchemaUtils.requireDistinct(this, "outputCols", outs)
    val mode = $(cleaningMode)
    SchemaUtils.require(
      this,
      mode != CleanMissingData.Custom || isDefined(customValue),
      FeaturizeMessages.NoCustomValue()
    )
    ins.zip(outs).foldLeft(schema) { case (out, (in, name)) =>
      val field =
        if (mode == CleanMissingData.Custom) SchemaUtils.requireColumn(this, schema, in)
        else
          SchemaUtils.requireColumnType(this, schema, in, "a numeric type")(SchemaUtils.isNumeric)
      if (name == in) out
      else {
        SchemaUtils.requireAbsent(this, out, name)
        out.add(StructField(name, field.dataType, nullable = true))
      }
    }
  }

  /** Whether a value of `column` is missing: null, or NaN in a floating-point column. */
  protected def missing(column: Column, field: StructField): Column = field.dataType match {
    case DoubleType | FloatType => column.isNull || isnan(column)
    case _ => column.isNull
  }
}

/** Learns a value to fill the missing values (null, and NaN in floating-point columns) of each of
  * `inputCols` with: the mean or the approximate median of the column's other values (numeric
  * columns), or `customValue` (any column type the value casts to).
  */
final class CleanMissingData(override val uid: String)
    extends Estimator[CleanMissingDataModel]
    with CleanMissingDataParams
    with StageWritable {

  def this() = this(Identifiable.randomUID("CleanMissingData"))

  override def transformSchema(schema: StructType): StructType = cleanedSchema(schema)

  override def fit(dataset: Dataset[_]): CleanMissingDataModel = {
    transformSchema(dataset.schema, logging = true)
    val ins = $(inputCols)
    val mode = $(cleaningMode)
    val fills = if (mode == CleanMissingData.Custom) {
      Array.fill(ins.length)($(customValue))
    } else {
      // Spark writes the statistic as a string, so both backends store the same text.
      val stats = ins.map { name =>
        val field = dataset.schema(name)
        val column = dataset.col(SchemaUtils.quoted(name))
        val present = when(!missing(column, field), column)
        val stat =
          if (mode == CleanMissingData.Mean) avg(present)
          else percentile_approx(present, lit(0.5), lit(CleanMissingData.MedianAccuracy))
        stat.cast(StringType)
      }
      val row = dataset.select(stats: _*).head()
      ins.indices.map { i =>
        SchemaUtils.require(
          this,
          !row.isNullAt(i),
          FeaturizeMessages.NoStatistic("column" -> ins(i), "mode" -> mode.toLowerCase)
        )
        row.getString(i)
      }.toArray
    }
    copyValues(new CleanMissingDataModel(uid).setFillValues(fills)).setParent(this)
  }

  override def copy(extra: ParamMap): CleanMissingData = defaultCopy(extra)
}

object CleanMissingData extends StageReadable[CleanMissingData] {
  val Mean = "Mean"
  val Median = "Median"
  val Custom = "Custom"

  /** The accuracy of the approximate median (Spark's default for percentile_approx). */
  val MedianAccuracy = 10000
}
