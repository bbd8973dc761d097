package mmlspark.explainers

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.functions.{array, lit, when}
import org.apache.spark.sql.types.{DoubleType, FloatType, StructType}

/** LIME for the columns `inputCols` of each row: samples around the row (a numeric column moved by
  * a normal draw scaled by its standard deviation in the background; a categorical one drawn from
  * the background's frequencies), scored by the model, weighted by an exponential kernel of their
  * distance to the row, and fitted with a weighted ridge regression. Per target class, a vector of
  * the coefficients: per standard deviation for a numeric column, for "the same category as the
  * row" for a categorical one; in metricsCol the weighted r2 of the fit.
  */
final class TabularLIME(override val uid: String)
    extends Transformer
    with LIMEParams
    with TabularLIMEDecls {

  def this() = this(Identifiable.randomUID("TabularLIME"))

  setDefault(categoricalFeatures -> Array.empty[String])

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(
      this,
      isDefined(inputCols) && $(inputCols).nonEmpty,
      ExplainerMessages.NoInputCols()
    )
    SchemaUtils.requireDistinct(this, "inputCols", $(inputCols).toSeq)
    $(categoricalFeatures).foreach { c =>
      SchemaUtils.require(
        this,
        $(inputCols).contains(c),
        ExplainerMessages.NotAnInput("column" -> c)
      )
    }
    $(inputCols).filterNot($(categoricalFeatures).contains).foreach { c =>
      SchemaUtils.requireColumnType(this, schema, c, "numeric (or listed in categoricalFeatures)")(
        SchemaUtils.isNumeric
      )
    }
    $(inputCols).foreach(SchemaUtils.requireColumn(this, schema, _))
    checkCommon(schema)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val data = dataset.toDF()
    Explaining.requireBatch(this, data)
    val cols = $(inputCols)
    val background = requireBackground()
    cols.foreach(SchemaUtils.requireColumn(this, background.schema, _))
    val rows = background
      .select(cols.toSeq.map(c => Explaining.col(c).cast(data.schema(c).dataType)): _*)
      .collect()
    SchemaUtils.require(this, rows.nonEmpty, ExplainerMessages.EmptyBackground())
    val categorical = cols.map($(categoricalFeatures).contains)
    val p = Explaining.Prefix
    val draws = cols.indices.map { j =>
      (p + "draw_" + j) -> (if (categorical(j)) Explaining.uniform(j) else Explaining.normal(j))
    }
    val originals = cols.indices.map(j => (p + "x_" + j) -> Explaining.col(cols(j)))
    val values = cols.indices.map { j =>
      val draw = Explaining.col(p + "draw_" + j)
      val x = Explaining.col(p + "x_" + j)
      val column: Column =
        if (categorical(j)) {
          val counts = rows
            .map(_.get(j))
            .filter(_ != null)
            .groupBy(identity)
            .map { case (v, all) => v -> all.length }
            .toSeq
            .sortBy(_._1.toString)
          val total = counts.map(_._2).sum.toDouble
          val cumulative = counts.map(_._2).scanLeft(0)(_ + _).tail.map(_ / total)
          val picked =
            counts.zip(cumulative).init.foldLeft(when(Explaining.col(Explaining.Sample) === 0, x)) {
              case (acc, ((value, _), upTo)) => acc.when(draw < upTo, lit(value))
            }
          picked.otherwise(lit(counts.last._1)).cast(data.schema(cols(j)).dataType)
        } else {
          val numbers = rows.filterNot(_.isNullAt(j)).map(r => r.getAs[Any](j).toString.toDouble)
          val mean = numbers.sum / numbers.length
          val std = math.sqrt(numbers.map(v => (v - mean) * (v - mean)).sum / numbers.length)
          val moved = x.cast(DoubleType) + draw * (if (std > 0) std else 1.0)
          data.schema(cols(j)).dataType match {
            case FloatType => moved.cast(FloatType)
            case _ => moved
          }
        }
      cols(j) -> column
    }
    val rep = Explaining.Rep -> array(cols.indices.map { j =>
      if (categorical(j))
        when(Explaining.col(cols(j)) === Explaining.col(p + "x_" + j), 1.0).otherwise(0.0)
      else Explaining.col(p + "draw_" + j)
    }: _*)
    Explaining.lime(
      this,
      data,
      cols.length,
      cols.toSeq,
      originals ++ draws ++ values :+ rep,
      categorical
    )
  }

  override def copy(extra: ParamMap): TabularLIME = {
    val copied = copyValues(new TabularLIME(uid), extra)
    copyBackground(copied)
    StageParams.copyStages(this, copied, extra)
  }
}

object TabularLIME extends StageReadable[TabularLIME] {
  override protected def create(uid: String, path: String, spark: SparkSession): TabularLIME = {
    val stage = new TabularLIME(uid)
    ExplainerParams.loadBackground(path, spark).foreach(stage.setBackgroundData)
    stage
  }
}
