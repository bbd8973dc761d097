package mmlspark.explainers

import mmlspark.contracts.{StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{functions, DataFrame, Dataset, Row, SparkSession}
import org.apache.spark.sql.functions.{broadcast, col, struct, udf}
import org.apache.spark.sql.types._

/** Kernel SHAP values of the tokens of the text column `inputCol` of each row: the text is split
  * into tokens (written to `tokensCol`); a coalition keeps some tokens and is scored as their text,
  * an absent token is dropped. Per target class, a vector [base value, phi_1, ..., phi_M] (the base
  * value is the model's value of the empty text, and the phis sum to the row's value less it); in
  * metricsCol the r2 of the weighted fit. Every coalition is scored (exact values) where numSamples
  * (default 2 * M + 2048) covers them, i.e. up to 11 tokens by default. A row without tokens gets
  * null outputs.
  */
final class TextSHAP(override val uid: String) extends Transformer with TextInput {

  def this() = this(Identifiable.randomUID("TextSHAP"))

  override def transformSchema(schema: StructType): StructType = checkTextSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    val data = tokenized(dataset)
    val model = explainedModel
    val input = Explaining.indexed(this, data)
    val explained = Explaining.complete(input, Seq(TextInput.Present))
    val size = TextSHAP.Size
    val sizes = explained
      .select(functions.size(Explaining.col(TextInput.Tokens)))
      .distinct()
      .collect()
      .map(_.getInt(0))
      .sorted
    val coalitions = sizes.map { m =>
      val samples = if (isDefined(numSamples)) $(numSamples) else KernelShap.defaultSamples(m)
      m -> KernelShap.coalitions(m, samples, Explaining.Seed)
    }.toMap
    val masks = Explaining.table(
      data,
      sizes.toSeq.flatMap { m =>
        coalitions(m).masks.toSeq.zipWithIndex.map { case (mask, i) => Row(m, i, mask.toSeq) }
      },
      StructType(
        Seq(
          StructField(size, IntegerType),
          StructField(Explaining.Sample, IntegerType),
          StructField(Explaining.Mask, ArrayType(DoubleType))
        )
      )
    )
    val samples = explained
      .join(broadcast(masks), functions.size(Explaining.col(TextInput.Tokens)) === col(size))
      .withColumn($(inputCol), TextInput.kept(Explaining.col(Explaining.Mask)))
      .drop(Explaining.Mask)
    val scored = Explaining.score(this, model, samples, Seq(size))
    val solve = udf { (values: Seq[Row]) =>
      val m = values.head.getStruct(0).getInt(1)
      val c = coalitions(m)
      val ys = new Array[Double](c.masks.length)
      values.foreach(r => ys(r.getStruct(0).getInt(0)) = r.getDouble(1))
      val fit = KernelShap.explain(c, ys)
      (fit.coefficients.toSeq, fit.r2)
    }
    val fits = Explaining.fitted(
      scored,
      solve,
      struct(Explaining.col(Explaining.Sample), Explaining.col(size))
    )
    named(Explaining.output(this, input, fits))
  }

  override def copy(extra: ParamMap): TextSHAP = {
    val copied = copyValues(new TextSHAP(uid), extra)
    StageParams.copyStages(this, copied, extra)
  }
}

object TextSHAP extends StageReadable[TextSHAP] {
  private val Size = Explaining.Prefix + "size"

  override protected def create(uid: String, path: String, spark: SparkSession): TextSHAP =
    new TextSHAP(uid)
}
