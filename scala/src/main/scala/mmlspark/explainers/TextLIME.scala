package mmlspark.explainers

import mmlspark.contracts.{StageParams, StageReadable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.functions.{lit, transform => each, when}
import org.apache.spark.sql.types.StructType

/** LIME for the tokens of the text column `inputCol` of each row: the text is split into tokens
  * (written to `tokensCol`), each sample keeps each token with chance `samplingFraction` (the first
  * keeps all) and is scored as their text; the samples are weighted by an exponential kernel of the
  * number of tokens they drop and fitted with a weighted ridge regression on the 0/1 presence of
  * each token. Per target class, a vector of one weight per token; in metricsCol the weighted r2 of
  * the fit. A row without tokens gets null outputs.
  */
final class TextLIME(override val uid: String)
    extends Transformer
    with LIMEParams
    with TextInput
    with TextLIMEDecls {

  def this() = this(Identifiable.randomUID("TextLIME"))

  setDefault(samplingFraction -> 0.7)

  override def transformSchema(schema: StructType): StructType = checkTextSchema(schema)

  override def transform(dataset: Dataset[_]): DataFrame = {
    val data = tokenized(dataset)
    val sample = Explaining.col(Explaining.Sample)
    val keep = each(
      Explaining.col(TextInput.Tokens),
      (_, i) =>
        when(sample === 0, lit(1.0))
          .when(TextInput.uniform(sample, i) < lit($(samplingFraction)), lit(1.0))
          .otherwise(lit(0.0))
    )
    val sampled = Seq(
      Explaining.Rep -> keep,
      $(inputCol) -> TextInput.kept(Explaining.col(Explaining.Rep))
    )
    named(Explaining.limeOf(this, data, Seq(TextInput.Present), sampled, _ => true, m => m))
  }

  override def copy(extra: ParamMap): TextLIME = {
    val copied = copyValues(new TextLIME(uid), extra)
    StageParams.copyStages(this, copied, extra)
  }
}

object TextLIME extends StageReadable[TextLIME] {
  override protected def create(uid: String, path: String, spark: SparkSession): TextLIME =
    new TextLIME(uid)
}
