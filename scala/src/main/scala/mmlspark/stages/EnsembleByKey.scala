package mmlspark.stages

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.stat.Summarizer
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.functions.{avg, col}
import org.apache.spark.sql.types.{DoubleType, StructField, StructType}

/** Groups rows by the `keys` columns and averages each of `cols` within a group: numeric columns to
  * a double, vector columns element-wise to a vector (all vectors of a group must have one size).
  * Used, for example, to average the predictions for all photos of one camera-trap burst. With
  * `collapseGroup` (the default) the output has one row per group, the keys and the averages;
  * otherwise every input row is kept and gets its group's averages appended. Nulls are skipped by
  * the average; null keys form their own group.
  */
final class EnsembleByKey(override val uid: String)
    extends Transformer
    with EnsembleByKeyDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("EnsembleByKey"))

  setDefault(colNames -> Array.empty[String], strategy -> "mean", collapseGroup -> true)

  private def outputNames: Array[String] =
    if ($(colNames).isEmpty) $(cols).map(c => s"mean($c)") else $(colNames)

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(
      this,
      isDefined(keys) && isDefined(cols),
      "params 'keys' and 'cols' must be set"
    )
    SchemaUtils.require(
      this,
      $(colNames).isEmpty || $(colNames).length == $(cols).length,
      s"colNames has ${$(colNames).length} names but cols has ${$(cols).length} columns"
    )
    val keyFields = $(keys).map(k => SchemaUtils.requireColumn(this, schema, k))
    val valueFields = $(cols).zip(outputNames).map { case (c, out) =>
      val field = SchemaUtils.requireColumnType(this, schema, c, "numeric or vector") { t =>
        SchemaUtils.isNumeric(t) || SchemaUtils.isVector(t)
      }
      StructField(out, if (SchemaUtils.isVector(field.dataType)) VectorType else DoubleType)
    }
    if ($(collapseGroup)) {
      SchemaUtils.requireDistinct(
        this,
        "keys and output columns",
        (keyFields ++ valueFields).map(_.name).toIndexedSeq
      )
      StructType(keyFields ++ valueFields)
    } else {
      valueFields.foreach(f => SchemaUtils.requireAbsent(this, schema, f.name))
      StructType(schema.fields ++ valueFields)
    }
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    val outSchema = transformSchema(dataset.schema)
    val aggregates: Seq[Column] = $(cols).zip(outputNames).toIndexedSeq.map { case (c, out) =>
      val input = col(SchemaUtils.quoted(c))
      val mean =
        if (SchemaUtils.isVector(dataset.schema(c).dataType)) Summarizer.mean(input)
        else avg(input.cast(DoubleType))
      mean.as(out)
    }
    val keyCols = $(keys).toIndexedSeq.map(k => col(SchemaUtils.quoted(k)))
    val grouped = dataset.groupBy(keyCols: _*).agg(aggregates.head, aggregates.tail: _*)
    if ($(collapseGroup)) grouped
    else {
      // Null-safe equality keeps the rows whose key is null with their group.
      val renamed = $(keys).foldLeft(grouped)((df, k) => df.withColumnRenamed(k, s"__key_$k"))
      val condition = $(keys)
        .map(k =>
          dataset.col(SchemaUtils.quoted(k)) <=> renamed.col(SchemaUtils.quoted(s"__key_$k"))
        )
        .reduce(_ && _)
      dataset
        .join(renamed, condition, "left")
        .select(outSchema.fieldNames.map(n => col(SchemaUtils.quoted(n))).toIndexedSeq: _*)
    }
  }

  override def copy(extra: ParamMap): EnsembleByKey = defaultCopy(extra)
}

object EnsembleByKey extends StageReadable[EnsembleByKey]
