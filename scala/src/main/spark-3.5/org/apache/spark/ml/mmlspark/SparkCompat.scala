package org.apache.spark.ml.mmlspark

import org.apache.spark.ml.param.Params
import org.apache.spark.ml.util.{DefaultParamsReader, DefaultParamsWriter}
import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.catalyst.expressions.Expression
import org.json4s.JValue

/** The calls whose Spark API differs between lines, as Spark 3.5 has them (this folder is compiled
  * into the Scala 2.12 jar only; spark-4/ holds the Spark 4.x twin). Spark 3.5's ML persistence
  * takes a SparkContext, and its ExpressionEncoder is built from expressions and a ClassTag.
  */
private[mmlspark] object SparkCompat {

  /** `base` with its serializer and deserializer replaced. */
  def withSerde(
      base: ExpressionEncoder[Row],
      serializer: Expression,
      deserializer: Expression
  ): ExpressionEncoder[Row] =
    ExpressionEncoder(serializer, deserializer, base.clsTag)

  def saveMetadata(instance: Params, path: String, spark: SparkSession, paramMap: JValue): Unit =
    DefaultParamsWriter.saveMetadata(instance, path, spark.sparkContext, None, Some(paramMap))

  def loadMetadata(path: String, spark: SparkSession, className: String): DefaultParamsReader.Metadata =
    DefaultParamsReader.loadMetadata(path, spark.sparkContext, className)

  def loadParamsInstance[T](path: String, spark: SparkSession): T =
    DefaultParamsReader.loadParamsInstance[T](path, spark.sparkContext)
}
