package mmlspark.contracts

import org.apache.spark.ml.Transformer
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{DataType, Metadata, StringType, StructType}

/** A transformer that computes one value per row from `inputCol` into `outputCol`, where a row it
  * cannot compute gets a null value and the reason in `errorCol` (contract 3), in the spirit of
  * Spark's `UnaryTransformer`. A stage says what it reads ([[inputKind]]), what it writes
  * ([[outputDataType]]) and how one row is computed ([[rowResults]], a UDF from
  * [[RowResults.udf1]]); this class checks the schema, adds the two columns and keeps the row
  * count.
  */
abstract class RowwiseTransformer
    extends Transformer
    with HasInputCol
    with HasOutputCol
    with HasErrorCol {

  /** What `inputCol` must hold. */
  protected def inputKind: ColumnKind

  protected def outputDataType: DataType

  /** Metadata of `outputCol` (a tensor's shape, say). */
  protected def outputMetadata: Metadata = Metadata.empty

  /** Checks of other columns and params, run by `transformSchema` after the input check. */
  protected def checkSchema(schema: StructType): Unit = ()

  /** The [[RowResult]] column of each row of `dataset`, from its `input` column. */
  protected def rowResults(dataset: Dataset[_], input: Column): Column

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.requireColumnType(this, schema, $(inputCol), inputKind)
    checkSchema(schema)
    SchemaUtils.requireAbsent(this, schema, $(outputCol))
    SchemaUtils.requireAbsent(this, schema, $(errorCol))
    SchemaUtils.requireDistinct(this, "outputCol and errorCol", Seq($(outputCol), $(errorCol)))
    schema
      .add($(outputCol), outputDataType, nullable = true, outputMetadata)
      .add($(errorCol), StringType)
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val input = col(SchemaUtils.quoted($(inputCol)))
    RowResults.expand(
      dataset,
      this,
      rowResults(dataset, input),
      $(outputCol),
      $(errorCol),
      outputMetadata
    )
  }
}
