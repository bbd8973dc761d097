package mmlspark.featurize

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Model
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{lit, when}
import org.apache.spark.sql.types.{DoubleType, StructType}

/** Fills the missing values (null, and NaN in floating-point columns) of each of `inputCols` with
  * its entry of `fillValues`, cast to the column's type (a mean through a double, so an integer
  * column gets the mean truncated), into the matching `outputCols` (in place when unset).
  */
final class CleanMissingDataModel(override val uid: String)
    extends Model[CleanMissingDataModel]
    with CleanMissingDataModelDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("CleanMissingDataModel"))

  setDefault(fillValues -> Array.empty[String])

  override def transformSchema(schema: StructType): StructType = {
    val out = cleanedSchema(schema)
    SchemaUtils.require(
      this,
      $(fillValues).length == $(inputCols).length,
      FeaturizeMessages.FillCount("fills" -> $(fillValues).length, "inputs" -> $(inputCols).length)
    )
    out
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val throughDouble = $(cleaningMode) == CleanMissingData.Mean
    $(inputCols).toSeq.zip(outputNames).zip($(fillValues)).foldLeft(dataset.toDF()) {
      case (df, ((in, out), fill)) =>
        val field = dataset.schema(in)
        val column = df.col(SchemaUtils.quoted(in))
        val value =
          if (throughDouble) lit(fill).cast(DoubleType).cast(field.dataType)
          else lit(fill).cast(field.dataType)
        df.withColumn(out, when(missing(column, field), value).otherwise(column))
    }
  }

  override def copy(extra: ParamMap): CleanMissingDataModel = defaultCopy(extra)
}

object CleanMissingDataModel extends StageReadable[CleanMissingDataModel]
