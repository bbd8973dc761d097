package mmlspark.train

import scala.collection.mutable

import mmlspark.contracts.SchemaUtils
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
  *   - string columns: indexed by frequency and one-hot encoded; null and categories unseen in
  *     training share one extra category (`StringIndexer`/`OneHotEncoder` with `keep`);
  *   - `array<numeric>` columns: one feature per element (arrays up to [[maxArrayLength]], sized by
  *     the first training row; missing elements imputed like numeric columns);
  *   - vector columns: as they are (a null vector becomes NaN features).
  */
private[train] object Featurization {

  val maxArrayLength = 1024

  def supported(t: DataType): Boolean = t match {
    case _: NumericType | BooleanType | StringType => true
    case ArrayType(_: NumericType | BooleanType, _) => true
    case v => v == VectorType
  }

  val expected = "numeric, boolean, string, array<numeric> or vector"

  /** Fails (before any job) for an input column of a type that cannot be featurized. */
  def check(stage: Params, schema: StructType, columns: Seq[String]): Unit = {
    SchemaUtils.require(stage, columns.nonEmpty, "no input columns to featurize")
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
      prefix: String
  ): PipelineModel = {
    check(stage, data.schema, columns)
    val numeric = mutable.ArrayBuffer[(String, String)]() // (SQL expression, column)
    val strings = mutable.ArrayBuffer[String]()
    val vectors = mutable.ArrayBuffer[(String, Int)]()
    def helper(kind: String) = s"$prefix${kind}_${numeric.size + strings.size + vectors.size}"
    def firstValue(c: String): Option[Any] =
      data.select(col(SchemaUtils.quoted(c))).na.drop().head(1).headOption.map(_.get(0))
    columns.foreach { c =>
      val q = SchemaUtils.quoted(c)
      data.schema(c).dataType match {
        case StringType => strings += c
        case t if t == VectorType =>
          val size = firstValue(c).map(_.asInstanceOf[Vector].size).getOrElse {
            SchemaUtils.require(
              stage,
              condition = false,
              s"vector column '$c' has no non-null value to size it by"
            )
            0
          }
          vectors += c -> size
        case _: ArrayType =>
          val size = firstValue(c).map(_.asInstanceOf[scala.collection.Seq[_]].length).getOrElse(0)
          SchemaUtils.require(
            stage,
            size > 0 && size <= maxArrayLength,
            s"array column '$c' must hold 1 to $maxArrayLength values per row (its first holds $size); " +
              "use a vector column for longer ones"
          )
          (0 until size).foreach(k => numeric += s"CAST($q[$k] AS DOUBLE)" -> helper("a"))
        case _ => numeric += s"CAST($q AS DOUBLE)" -> helper("n")
      }
    }
    val imputed = numeric.map(n => s"${n._2}_imputed")
    val indexed = strings.map(s => s"$prefix${s}_index")
    val encoded = strings.map(s => s"$prefix${s}_onehot")
    val stages = mutable.ArrayBuffer[PipelineStage]()
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
      .setInputCols((imputed ++ encoded ++ vectors.map(_._1)).toArray)
      .setOutputCol(output)
      .setHandleInvalid("keep")
    new Pipeline().setStages(stages.toArray).fit(data)
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
