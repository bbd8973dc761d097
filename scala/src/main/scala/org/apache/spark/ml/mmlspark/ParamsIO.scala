package org.apache.spark.ml.mmlspark

import org.apache.spark.ml.param.Params
import org.apache.spark.ml.util.{DefaultParamsReader, DefaultParamsWriter}
import org.apache.spark.sql.SparkSession
import org.json4s.JValue

/** Opens Spark's ML metadata format (private to `org.apache.spark.ml`) to mmlspark's writers, so
  * our saved stages have exactly the layout Spark's own stages have.
  */
object ParamsIO {

  def saveMetadata(
      instance: Params,
      path: String,
      spark: SparkSession,
      paramMap: JValue
  ): Unit =
    DefaultParamsWriter.saveMetadata(instance, path, spark, None, Some(paramMap))

  /** Loads the metadata at `path`, checks it was written for `className`, and sets the saved params
    * and defaults on `instance`.
    */
  def loadParams(instance: Params, path: String, spark: SparkSession, className: String): Unit =
    DefaultParamsReader.loadMetadata(path, spark, className).getAndSetParams(instance)

  def loadUid(path: String, spark: SparkSession, className: String): String =
    DefaultParamsReader.loadMetadata(path, spark, className).uid

  def loadStage[T](path: String, spark: SparkSession): T =
    DefaultParamsReader.loadParamsInstance[T](path, spark)
}
