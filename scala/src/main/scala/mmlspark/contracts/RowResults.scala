package mmlspark.contracts

import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types.{DataType, Metadata, StringType, StructType}

/** Per-row results that are a value or an error message, never a failed job (contract 3). */
object RowResults {

  /** The error message a failed row gets: the message of a rejected input (IllegalArgumentException
    * and its subclasses) as is, others with their exception class.
    */
  def describe(e: Throwable): String = e match {
    case rejected: IllegalArgumentException => rejected.getMessage
    case _: OutOfMemoryError =>
      s"out of memory on this executor (${e.getMessage}); the row was skipped and its memory " +
        "released. Lower the image or batch size, or give the executors more memory"
    case other => s"${other.getClass.getSimpleName}: ${other.getMessage}"
  }

  /** The schema with `outputCol` (of `dataType`) and `errorCol` (string) appended; both must be new
    * and different from each other.
    */
  def schema(
      stage: Identifiable with org.apache.spark.ml.param.Params,
      schema: StructType,
      outputCol: String,
      dataType: DataType,
      errorCol: String,
      metadata: Metadata = Metadata.empty
  ): StructType = {
    SchemaUtils.requireAbsent(stage, schema, outputCol)
    SchemaUtils.requireAbsent(stage, schema, errorCol)
    SchemaUtils.requireDistinct(stage, "outputCol and errorCol", Seq(outputCol, errorCol))
    schema.add(outputCol, dataType, nullable = true, metadata).add(errorCol, StringType)
  }

  /** Adds `outputCol` and `errorCol` from `result`, a struct column with fields `valueField` and
    * `error`. `result` must be computed once per row however many fields are read from it: stages
    * build it from a UDF marked nondeterministic, which Spark never duplicates.
    */
  def expand(
      dataset: Dataset[_],
      stage: Identifiable,
      result: Column,
      valueField: String,
      outputCol: String,
      errorCol: String,
      metadata: Metadata = Metadata.empty
  ): DataFrame = {
    val tmp = s"__result_${stage.uid}"
    dataset
      .withColumn(tmp, result)
      .withColumn(outputCol, col(s"$tmp.$valueField").as(outputCol, metadata))
      .withColumn(errorCol, col(s"$tmp.error"))
      .drop(tmp)
  }
}
