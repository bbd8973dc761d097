package org.apache.spark.ml.mmlspark

import org.apache.spark.ml.param.Params
import org.apache.spark.ml.util.DefaultParamsReader
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
    SparkCompat.saveMetadata(instance, path, spark, paramMap)

  /** Reads the metadata at `path`, checking it was written for `className` (any class: ""). */
  def loadMetadata(path: String, spark: SparkSession, className: String): SavedParams =
    new SavedParams(SparkCompat.loadMetadata(path, spark, className))

  def loadStage[T](path: String, spark: SparkSession): T =
    SparkCompat.loadParamsInstance[T](path, spark)
}

/** The uid and params of a saved stage, ready to be set on a new instance. */
final class SavedParams private[mmlspark] (metadata: DefaultParamsReader.Metadata) {

  def uid: String = metadata.uid

  /** The class the stage was saved as. */
  def className: String = metadata.className

  /** Sets the saved params and defaults on `instance`. */
  def setOn(instance: Params): Unit = metadata.getAndSetParams(instance)

  /** The names of the params saved, set or as defaults: a param added to a stage after it was saved
    * is not among them.
    */
  def names: Set[String] = Seq(metadata.params, metadata.defaultParams).flatMap {
    case org.json4s.JObject(fields) => fields.map(_._1)
    case _ => Nil
  }.toSet
}
