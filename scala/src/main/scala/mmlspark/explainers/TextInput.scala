package mmlspark.explainers

import mmlspark.contracts.SchemaUtils
import org.apache.spark.sql.{Column, DataFrame, Dataset}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types._

/** An explainer of the tokens of the text column `inputCol`: its checks, the tokens (written to
  * `tokensCol`), and the text of a sample that keeps some of them.
  */
private[explainers] trait TextInput extends ExplainerParams with TextInputDecls {

  setDefault(tokensCol -> "tokens")

  protected def checkTextSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(inputCol), ExplainerMessages.NoTextCol())
    SchemaUtils.requireColumnType(this, schema, $(inputCol), ExplainerMessages.TextType())(
      _ == StringType
    )
    SchemaUtils.requireAbsent(this, schema, $(tokensCol))
    SchemaUtils.requireDistinct(
      this,
      "tokensCol, outputCol and metricsCol",
      Seq($(tokensCol), $(outputCol), $(metricsCol))
    )
    val common = checkCommon(schema)
    val tokens = StructField($(tokensCol), ArrayType(StringType, containsNull = false))
    StructType(schema.fields ++ (tokens +: common.fields.drop(schema.length)))
  }

  /** The rows with their tokens (in [[TextInput.Tokens]]) and, where there is at least one, the
    * flag [[TextInput.Present]] that makes them explained; checked before any job.
    */
  protected def tokenized(dataset: Dataset[_]): DataFrame = {
    checkTextSchema(dataset.schema)
    val data = dataset.toDF()
    Explaining.requireBatch(this, data)
    val tokens = Explaining.col(TextInput.Tokens)
    data
      .withColumn(TextInput.Tokens, TextInput.tokens(Explaining.col($(inputCol))))
      .withColumn(TextInput.Present, when(size(tokens) > 0, lit(true)))
  }

  /** The explained rows with the tokens' column named tokensCol, after the input's columns. */
  protected def named(explained: DataFrame): DataFrame = {
    val cols = explained.columns.toSeq.filterNot(Set(TextInput.Tokens, TextInput.Present))
    val (inputs, outputs) = cols.partition(c => c != $(outputCol) && c != $(metricsCol))
    explained.select(
      (inputs.map(Explaining.col) ++ (Explaining.col(TextInput.Tokens).as($(tokensCol)) +:
        outputs.map(Explaining.col))): _*
    )
  }
}

private[explainers] object TextInput {
  val Tokens: String = Explaining.Prefix + "tokens"
  val Present: String = Explaining.Prefix + "present"

  /** A text's tokens: lowercased and split at whitespace, empty strings dropped (Spark's
    * Tokenizer's tokens, without the empty ones it gives for leading or repeated whitespace).
    */
  def tokens(text: Column): Column = filter(split(lower(text), "\\s+"), t => length(t) > 0)

  /** The text of a sample: the tokens whose `keep` (array<double>) is 1, joined by single spaces.
    */
  def kept(keep: Column): Column =
    array_join(
      transform(
        Explaining.col(Tokens),
        (t: Column, i: Column) => when(element_at(keep, i + 1) === 1.0, t)
      ),
      " "
    )

  /** A uniform draw in [0, 1) per (row's tokens, sample, token index i): a hash of them, so
    * reproducible whatever the partitioning and the same on either backend.
    */
  def uniform(sample: Column, i: Column): Column =
    (xxhash64(lit(Explaining.Seed), Explaining.col(Tokens), sample, i)
      .bitwiseAND(lit((1L << 52) - 1))
      .cast(DoubleType) / lit((1L << 52).toDouble))
}
