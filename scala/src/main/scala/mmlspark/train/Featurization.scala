package mmlspark.train

import scala.collection.mutable

import mmlspark.contracts.SchemaUtils
import org.apache.spark.ml.mmlspark.SparkInternals.Logging
import org.apache.spark.ml.{Pipeline, PipelineModel, PipelineStage}
import org.apache.spark.ml.feature._
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.ml.param.Params
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.types._

/** Turns mixed columns into one feature vector with Spark's own stages, fitted on the training
  * data, so that scoring repeats exactly the training featurization:
  *   - numeric and boolean columns: as doubles, a null (or NaN) replaced by the column's training
  *     mean (`Imputer`);
  *   - categorical string columns: indexed by frequency and one-hot encoded; null and categories
  *     unseen in training share one extra category (`StringIndexer`/`OneHotEncoder` with `keep`);
  *   - free-text string columns: lower-cased, split into words on non-word characters
  *     (`RegexTokenizer`) and the word counts hashed into `numFeatures` buckets (`HashingTF`); a
  *     null is an empty text. Which string columns are text is decided by [[isText]] on a sample of
  *     the training rows unless the caller names them; the choice is logged;
  *   - `array<numeric>` columns: one feature per element (arrays up to [[maxArrayLength]], sized by
  *     the first training row; missing elements imputed like numeric columns);
  *   - vector columns: as they are (a null vector becomes NaN features).
  */
private[train] object Featurization extends Logging {

  val maxArrayLength = 1024

  /** How many non-null training values of a string column [[isText]] looks at. */
  val textSample = 1000

  /** A string column is free text when, over a sample of its non-null training values, the values
    * average at least `minTextTokens` words (runs of word characters) and at least
    * `minTextDistinctFraction` of them are distinct: many-word values that rarely repeat, where a
    * one-hot category per value would not generalise. Short or repeating values (codes, names, "New
    * York") stay categorical.
    */
  val minTextTokens = 2.0
  val minTextDistinctFraction = 0.5

  /** Whether the sampled non-null `values` of a string column look like free text. */
  def isText(values: Seq[String]): Boolean =
    values.nonEmpty && {
      val tokens = values.map(v => "\\w+".r.findAllIn(v).length).sum.toDouble / values.size
      val distinct = values.distinct.size.toDouble / values.size
      tokens >= minTextTokens && distinct >= minTextDistinctFraction
    }

  /** How each string column was featurized: the free-text ones and the categorical ones. */
  final case class StringChoice(text: Seq[String], categorical: Seq[String])

  def supported(t: DataType): Boolean = t match {
    case _: NumericType | BooleanType | StringType => true
    case ArrayType(_: NumericType | BooleanType, _) => true
    case v => v == VectorType
  }

  val expected = "numeric, boolean, string, array<numeric> or vector"

  /** Fails (before any job) for an input column of a type that cannot be featurized. */
  def check(stage: Params, schema: StructType, columns: Seq[String]): Unit = {
    SchemaUtils.require(stage, columns.nonEmpty, TrainMessages.NoFeatures())
    columns.foreach(c => SchemaUtils.requireColumnType(stage, schema, c, expected)(supported))
  }

  /** Fits the featurization of `columns` of `data` into the vector column `output`; every helper
    * column it adds starts with `prefix`.
    */
  def fit(
      stage: Params,
      data: DataFrame,
      columns: Seq[String],
      output: String,
      prefix: String,
      numFeatures: Int,
      textCols: Option[Seq[String]],
      categoricalCols: Option[Seq[String]]
  ): (PipelineModel, StringChoice) = {
    check(stage, data.schema, columns)
    val stringCols = columns.filter(c => data.schema(c).dataType == StringType)
    (textCols.toSeq.flatten ++ categoricalCols.toSeq.flatten).foreach { c =>
      SchemaUtils.require(
        stage,
        stringCols.contains(c),
        TrainMessages.NotStringColumn("column" -> c, "strings" -> TrainMessages.quoted(stringCols))
      )
    }
    val both = textCols.toSeq.flatten.intersect(categoricalCols.toSeq.flatten)
    SchemaUtils.require(
      stage,
      both.isEmpty,
      TrainMessages.TextAndCategorical("columns" -> TrainMessages.quoted(both))
    )
    val text = stringCols.filter { c =>
      if (textCols.exists(_.contains(c))) true
      else if (categoricalCols.exists(_.contains(c))) false
      else {
        val sample = data
          .select(col(SchemaUtils.quoted(c)))
          .na
          .drop()
          .limit(textSample)
          .collect()
          .map(_.getString(0))
          .toSeq
        isText(sample)
      }
    }
    val choice = StringChoice(text, stringCols.filterNot(text.contains))
    logInfo(
      s"${SchemaUtils.stageName(stage)}: string columns hashed as free text into $numFeatures " +
        s"buckets: ${choice.text.mkString("[", ", ", "]")}; one-hot encoded as categories: " +
        s"${choice.categorical.mkString("[", ", ", "]")} (override with textCols / categoricalCols)"
    )
    val numeric = mutable.ArrayBuffer[(String, String)]() // (SQL expression, column)
    val strings = mutable.ArrayBuffer[String]()
    val texts = mutable.ArrayBuffer[String]()
    val vectors = mutable.ArrayBuffer[(String, Int)]()
    def helper(kind: String) = s"$prefix${kind}_${numeric.size + strings.size + vectors.size}"
    def firstValue(c: String): Option[Any] =
      data.select(col(SchemaUtils.quoted(c))).na.drop().head(1).headOption.map(_.get(0))
    columns.foreach { c =>
      val q = SchemaUtils.quoted(c)
      data.schema(c).dataType match {
        case StringType if text.contains(c) => texts += c
        case StringType => strings += c
        case t if t == VectorType =>
          val size = firstValue(c).map(_.asInstanceOf[Vector].size).getOrElse {
            SchemaUtils.require(
              stage,
              condition = false,
              TrainMessages.UnsizedVector("column" -> c)
            )
            0
          }
          vectors += c -> size
        case _: ArrayType =>
          val size = firstValue(c).map(_.asInstanceOf[scala.collection.Seq[_]].length).getOrElse(0)
          SchemaUtils.require(
            stage,
            size > 0 && size <= maxArrayLength,
            TrainMessages.ArrayLength("column" -> c, "max" -> maxArrayLength, "size" -> size)
          )
          (0 until size).foreach(k => numeric += s"CAST($q[$k] AS DOUBLE)" -> helper("a"))
        case _ => numeric += s"CAST($q AS DOUBLE)" -> helper("n")
      }
    }
    val imputed = numeric.map(n => s"${n._2}_imputed")
    val indexed = strings.map(s => s"$prefix${s}_index")
    val encoded = strings.map(s => s"$prefix${s}_onehot")
    val stages = mutable.ArrayBuffer[PipelineStage]()
    val hashed = texts.zipWithIndex.map { case (c, k) =>
      val (filled, tokens, counts) =
        (s"${prefix}t_${k}_text", s"${prefix}t_${k}_tokens", s"${prefix}t_${k}_tf")
      stages += new SQLTransformer().setStatement(
        s"SELECT *, COALESCE(${SchemaUtils.quoted(c)}, '') AS ${SchemaUtils.quoted(filled)} FROM __THIS__"
      )
      stages += new RegexTokenizer()
        .setInputCol(filled)
        .setOutputCol(tokens)
        .setPattern("\\W+")
        .setGaps(true)
        .setToLowercase(true)
      stages += new HashingTF().setInputCol(tokens).setOutputCol(counts).setNumFeatures(numFeatures)
      counts
    }
    if (numeric.nonEmpty) {
      stages += new SQLTransformer().setStatement(
        s"SELECT *, ${numeric.map { case (e, n) => s"$e AS ${SchemaUtils.quoted(n)}" }.mkString(", ")} FROM __THIS__"
      )
      stages += new Imputer()
        .setInputCols(numeric.map(_._2).toArray)
        .setOutputCols(imputed.toArray)
        .setStrategy("mean")
    }
    if (strings.nonEmpty) {
      stages += new StringIndexer()
        .setInputCols(strings.toArray)
        .setOutputCols(indexed.toArray)
        .setHandleInvalid("keep")
      stages += new OneHotEncoder()
        .setInputCols(indexed.toArray)
        .setOutputCols(encoded.toArray)
        .setHandleInvalid("keep")
    }
    vectors.foreach { case (c, size) =>
      stages += new VectorSizeHint().setInputCol(c).setSize(size).setHandleInvalid("optimistic")
    }
    stages += new VectorAssembler()
      .setInputCols((imputed ++ encoded ++ hashed ++ vectors.map(_._1)).toArray)
      .setOutputCol(output)
      .setHandleInvalid("keep")
    (new Pipeline().setStages(stages.toArray).fit(data), choice)
  }

  /** `data` featurized into `output`, without the other helper columns. */
  def apply(
      featurization: PipelineModel,
      data: DataFrame,
      prefix: String,
      output: String
  ): DataFrame = {
    val out = featurization.transform(data)
    out.drop(out.columns.filter(c => c.startsWith(prefix) && c != output).toIndexedSeq: _*)
  }
}
