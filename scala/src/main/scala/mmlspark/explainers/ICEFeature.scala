package mmlspark.explainers

import scala.util.Try

import org.json4s._
import org.json4s.jackson.JsonMethods

/** A feature of [[ICETransformer]] with its settings, read from one element of
  * `categoricalFeatures` or `numericFeatures`: a column name, or a JSON object with "name" and the
  * settings SynapseML's ICECategoricalFeature and ICENumericFeature have.
  */
private[explainers] sealed trait ICEFeature {
  def name: String
  def outputColName: Option[String]
  def outputCol: String = outputColName.getOrElse(name + "_dependence")
}

/** A categorical feature: its `numTopValues` most frequent values are its grid. */
private[explainers] final case class ICECategoricalFeature(
    name: String,
    numTopValues: Option[Int],
    outputColName: Option[String]
) extends ICEFeature

/** A numeric feature: `numSplits` + 1 evenly spaced values from `rangeMin` to `rangeMax` (unset:
  * the column's minimum and maximum) are its grid.
  */
private[explainers] final case class ICENumericFeature(
    name: String,
    numSplits: Option[Int],
    rangeMin: Option[Double],
    rangeMax: Option[Double],
    outputColName: Option[String]
) extends ICEFeature

private[explainers] object ICEFeature {
  val CategoricalKeys: Seq[String] = Seq("name", "numTopValues", "outputColName")
  val NumericKeys: Seq[String] = Seq("name", "numSplits", "rangeMin", "rangeMax", "outputColName")

  /** The feature `setting` describes, or why it describes none (Left). */
  def parse(setting: String, categorical: Boolean): Either[String, ICEFeature] = {
    val keys = if (categorical) CategoricalKeys else NumericKeys
    if (!setting.trim.startsWith("{")) {
      if (setting.trim.isEmpty) Left("the name is empty")
      else if (categorical) Right(ICECategoricalFeature(setting, None, None))
      else Right(ICENumericFeature(setting, None, None, None, None))
    } else
      Try(JsonMethods.parse(setting)).toOption match {
        case Some(JObject(fields)) =>
          val values = fields.toMap
          val unknown = fields.map(_._1).filterNot(keys.contains)
          def text(key: String): Either[String, Option[String]] = values.get(key) match {
            case None => Right(None)
            case Some(JString(s)) if s.nonEmpty => Right(Some(s))
            case Some(_) => Left(s""""$key" must be a non-empty string""")
          }
          def count(key: String): Either[String, Option[Int]] = values.get(key) match {
            case None => Right(None)
            case Some(JInt(i)) if i >= 1 && i <= Int.MaxValue => Right(Some(i.toInt))
            case Some(_) => Left(s""""$key" must be an integer of at least 1""")
          }
          def number(key: String): Either[String, Option[Double]] = values.get(key) match {
            case None => Right(None)
            case Some(JInt(i)) => Right(Some(i.toDouble))
            case Some(JDouble(d)) if !d.isNaN && !d.isInfinite => Right(Some(d))
            case Some(JDecimal(d)) => Right(Some(d.toDouble))
            case Some(_) => Left(s""""$key" must be a number""")
          }
          if (unknown.nonEmpty) Left(s"unknown key(s) ${unknown.mkString(", ")}")
          else
            for {
              name <- text("name").flatMap(_.toRight("\"name\" is missing"))
              output <- text("outputColName")
              feature <-
                if (categorical) count("numTopValues").map(ICECategoricalFeature(name, _, output))
                else
                  for {
                    splits <- count("numSplits")
                    low <- number("rangeMin")
                    high <- number("rangeMax")
                  } yield ICENumericFeature(name, splits, low, high, output)
            } yield feature
        case _ => Left("it is not a JSON object")
      }
  }
}
