package mmlspark.featurize

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types.{DoubleType, StringType, StructField, StructType}

import scala.jdk.CollectionConverters._

/** Summarizes every column of its input: one row per column, named in `Feature`, with the groups of
  * statistics its params ask for. `counts`: the rows with a value (`Count`), the approximate number
  * of distinct values (`Unique_Value_Count`) and the missing values, null or NaN
  * (`Missing_Value_Count`). `basic`: the quantiles 0, 0.25, 0.5, 0.75 and 1 (`Min` ... `Max`) and
  * `percentiles`: 0.005 ... 0.995 (`P0_5` ... `P99_5`), both within `errorThreshold` (0: exact) of
  * the null-free values. `sample`: the sample variance and standard deviation, and the skewness and
  * excess kurtosis. A statistic a column has no value for (a quantile of a string column, the
  * variance of one value) is NaN.
  */
final class SummarizeData(override val uid: String)
    extends Transformer
    with SummarizeDataDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("SummarizeData"))

  setDefault(counts -> true, basic -> true, sample -> true, percentiles -> true)
  setDefault(errorThreshold -> 0.0)

  override def transformSchema(schema: StructType): StructType = {
    val groups = Seq(
      $(counts) -> SummarizeData.CountFields,
      $(basic) -> SummarizeData.BasicFields,
      $(sample) -> SummarizeData.SampleFields,
      $(percentiles) -> SummarizeData.PercentileFields
    )
    val fields = groups.collect { case (true, names) => names }.flatten
    StructType(
      StructField(SummarizeData.Feature, StringType, nullable = false) +:
        fields.map(StructField(_, DoubleType, nullable = false))
    )
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val outSchema = transformSchema(dataset.schema, logging = true)
    SchemaUtils.require(this, !dataset.isStreaming, FeaturizeMessages.StreamingInput())
    val df = dataset.toDF()
    val fields = df.schema.fields.toSeq
    val numeric = fields.filter(f => SchemaUtils.isNumeric(f.dataType)).map(_.name)
    val nan = lit(Double.NaN)
    // One pass for the counts and the moments, in the order: per column, the counts, then per
    // numeric column the moments.
    val countAggs = if ($(counts)) fields.flatMap { f =>
      val c = df.col(SchemaUtils.quoted(f.name))
      Seq(
        count(lit(1)).cast(DoubleType),
        coalesce(sum(ValueIndexer.missing(c, f.dataType).cast("int")), lit(0)).cast(DoubleType),
        approx_count_distinct(c).cast(DoubleType)
      )
    }
    else Nil
    val momentAggs = if ($(sample)) numeric.flatMap { name =>
      val c = df.col(SchemaUtils.quoted(name)).cast(DoubleType)
      Seq(var_samp(c), stddev_samp(c), skewness(c), kurtosis(c))
        .map(s => coalesce(s.cast(DoubleType), nan))
    }
    else Nil
    val aggregated: Row =
      if (countAggs.isEmpty && momentAggs.isEmpty) Row.empty
      else df.agg((countAggs ++ momentAggs).head, (countAggs ++ momentAggs).tail: _*).head()
    def quantiles(probabilities: Seq[Double]): Map[String, Seq[Double]] =
      if (numeric.isEmpty) Map.empty[String, Seq[Double]]
      else
        numeric
          .zip(df.stat.approxQuantile(numeric.toArray, probabilities.toArray, $(errorThreshold)))
          .map { case (n, qs) =>
            n -> (if (qs.isEmpty) probabilities.map(_ => Double.NaN) else qs.toSeq)
          }
          .toMap
    val basicValues =
      if ($(basic)) quantiles(SummarizeData.BasicQuantiles) else Map.empty[String, Seq[Double]]
    val percentileValues =
      if ($(percentiles)) quantiles(SummarizeData.PercentileQuantiles)
      else Map.empty[String, Seq[Double]]
    val rows = fields.zipWithIndex.map { case (f, i) =>
      val counted =
        if (! $(counts)) Nil
        else {
          val (rowCount, missingCount, distinct) =
            (
              aggregated.getDouble(3 * i),
              aggregated.getDouble(3 * i + 1),
              aggregated.getDouble(3 * i + 2)
            )
          Seq(rowCount - missingCount, distinct, missingCount)
        }
      val k = numeric.indexOf(f.name)
      val moments =
        if (! $(sample)) Nil
        else if (k < 0) Seq.fill(4)(Double.NaN)
        else (0 until 4).map(j => aggregated.getDouble(countAggs.length + 4 * k + j))
      def quantileValues(values: Map[String, Seq[Double]], size: Int, on: Boolean): Seq[Double] =
        if (!on) Nil else values.getOrElse(f.name, Seq.fill(size)(Double.NaN))
      val basicRow = quantileValues(basicValues, SummarizeData.BasicQuantiles.length, $(basic))
      val percentileRow =
        quantileValues(percentileValues, SummarizeData.PercentileQuantiles.length, $(percentiles))
      Row.fromSeq(f.name +: (counted ++ basicRow ++ moments ++ percentileRow))
    }
    df.sparkSession.createDataFrame(rows.asJava, outSchema)
  }

  override def copy(extra: ParamMap): SummarizeData = defaultCopy(extra)
}

object SummarizeData extends StageReadable[SummarizeData] {
  val Feature = "Feature"
  val CountFields: Seq[String] = Seq("Count", "Unique_Value_Count", "Missing_Value_Count")
  val BasicQuantiles: Seq[Double] = Seq(0.0, 0.25, 0.5, 0.75, 1.0)
  val BasicFields: Seq[String] = Seq("Min", "1st_Quartile", "Median", "3rd_Quartile", "Max")
  val SampleFields: Seq[String] =
    Seq("Sample_Variance", "Sample_Standard_Deviation", "Sample_Skewness", "Sample_Kurtosis")
  val PercentileQuantiles: Seq[Double] = Seq(0.005, 0.01, 0.05, 0.95, 0.99, 0.995)
  val PercentileFields: Seq[String] = Seq("P0_5", "P1", "P5", "P95", "P99", "P99_5")
}
