package mmlspark.explainers

import scala.jdk.CollectionConverters._

import mmlspark.contracts.SchemaUtils
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.functions.{array_to_vector, vector_to_array}
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.sql.{functions, Column, DataFrame, Row}
import org.apache.spark.sql.expressions.UserDefinedFunction
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types._

/** The explainers' plan, for every row at once: each row's samples are made as rows of one
  * DataFrame, scored by one `model.transform`, grouped back by row and target class, and each
  * group's local linear fit solved on the executors. The helper columns' names start with
  * [[Explaining.Prefix]].
  */
private[explainers] object Explaining {

  val Prefix = "__explain_"
  val Id: String = Prefix + "id"
  val Sample: String = Prefix + "sample"
  val Mask: String = Prefix + "mask"
  val Classes: String = Prefix + "classes"
  val Rep: String = Prefix + "rep"

  /** Seeds of the random draws (fixed: an explanation is reproducible for the same partitions). */
  val Seed = 1234L

  def col(name: String): Column = functions.col(SchemaUtils.quoted(name))

  /** The target classes of each row: the targetClassesCol, or targetClasses ([0] when empty). */
  def classes(stage: ExplainerParams): Column =
    classesOf(
      if (stage.isSet(stage.targetClassesCol)) Some(stage.getTargetClassesCol) else None,
      stage.getTargetClasses
    )

  /** The target classes of each row: the column `classesCol`, or `fixed` ([0] when empty). */
  def classesOf(classesCol: Option[String], fixed: Array[Int]): Column =
    classesCol.map(col).getOrElse {
      array((if (fixed.isEmpty) Array(0) else fixed).toSeq.map(lit(_)): _*)
    }

  def targets(stage: ExplainerParams, scored: DataFrame): Column =
    targets(stage.getTargetCol, scored)

  /** The values of the target classes (in `Classes`), as array<double>, from the scored rows. */
  def targets(targetCol: String, scored: DataFrame): Column = {
    val target = col(targetCol)
    scored.schema(targetCol).dataType match {
      case VectorType =>
        transform(col(Classes), c => element_at(vector_to_array(target), c + 1))
      case ArrayType(_, _) =>
        transform(col(Classes), c => element_at(target, c + 1).cast(DoubleType))
      case _ => array(target.cast(DoubleType))
    }
  }

  /** The input with a row id, and its target classes. */
  def indexed(stage: ExplainerParams, data: DataFrame): DataFrame =
    data.withColumn(Id, monotonically_increasing_id()).withColumn(Classes, classes(stage))

  /** Scores `samples` (rows of `Id`, `Sample`, `Classes` and the model's inputs, plus `keep`) with
    * the model: one row per (id, sample, class index `k`) with the target's value `y`.
    */
  def score(
      stage: ExplainerParams,
      model: Transformer,
      samples: DataFrame,
      keep: Seq[String]
  ): DataFrame = {
    val scored = model.transform(samples)
    scored
      .select((Seq(col(Id), col(Sample)) ++ keep.map(col) :+ targets(stage, scored).as("t")): _*)
      .select(
        (Seq(col(Id), col(Sample)) ++ keep.map(col) :+ posexplode(col("t")).as(Seq("k", "y"))): _*
      )
  }

  /** The input rows joined with their fits (`fits`: rows of `Id`, `k`, `coefficients`
    * array<double>, `r2`), as outputCol (a vector per target class, in class order) and metricsCol,
    * and the columns `extra` of the fits (the same for every class of a row).
    */
  def output(
      stage: ExplainerParams,
      input: DataFrame,
      fits: DataFrame,
      extra: Seq[String] = Nil
  ): DataFrame = {
    val byClass = (l: Column, r: Column) =>
      when(l("k") < r("k"), -1).when(l("k") > r("k"), 1).otherwise(0)
    val perRow = fits
      .select(
        (Seq(col(Id), col("k"), array_to_vector(col("coefficients")).as("v"), col("r2")) ++
          extra.map(col)): _*
      )
      .groupBy(col(Id))
      .agg(
        array_sort(collect_list(struct(col("k"), col("v"), col("r2"))), byClass).as("fits"),
        extra.map(e => first(col(e)).as(e)): _*
      )
      .select(
        (Seq(
          col(Id),
          transform(col("fits"), f => f("v")).as(stage.getOutputCol),
          array_to_vector(transform(col("fits"), f => f("r2"))).as(stage.getMetricsCol)
        ) ++ extra.map(col)): _*
      )
    input.join(perRow, Seq(Id), "left").drop(Id, Classes)
  }

  /** A small table of rows, made on the driver. */
  def table(input: DataFrame, rows: Seq[Row], schema: StructType): DataFrame =
    input.sparkSession.createDataFrame(rows.asJava, schema)

  /** The rows explained: those whose `inputs` are all present (the others get null outputs). */
  def complete(input: DataFrame, inputs: Seq[String]): DataFrame =
    input.filter(inputs.map(col(_).isNotNull).foldLeft(lit(true))(_ && _))

  def requireBatch(stage: ExplainerParams, data: DataFrame): Unit =
    SchemaUtils.require(
      stage,
      !data.isStreaming,
      ExplainerMessages.Streaming()
    )

  /** Kernel SHAP for every row whose `required` columns are present (the others get null outputs).
    * `mix(mask)` gives the model's input columns of a sample: each feature from the row where
    * `mask` is 1, else from the background row's columns that `background` holds.
    */
  def shap(
      stage: ExplainerParams,
      data: DataFrame,
      features: Int,
      required: Seq[String],
      background: DataFrame,
      mix: Column => Seq[(String, Column)]
  ): DataFrame = {
    val model = stage.explainedModel
    val samples =
      if (stage.isDefined(stage.numSamples)) stage.getNumSamples
      else KernelShap.defaultSamples(features)
    val coalitions = KernelShap.coalitions(features, samples, Seed)
    val masks = table(
      data,
      coalitions.masks.toSeq.zipWithIndex.map { case (m, i) => Row(i, m.toSeq) },
      StructType(Seq(StructField(Sample, IntegerType), StructField(Mask, ArrayType(DoubleType))))
    )
    val input = indexed(stage, data)
    val expanded =
      complete(input, required).crossJoin(broadcast(masks)).crossJoin(broadcast(background))
    val mixed = mix(col(Mask)).foldLeft(expanded) { case (df, (name, c)) => df.withColumn(name, c) }
    val inputs = mixed.drop((Mask +: background.columns.toSeq): _*)
    val scored = score(stage, model, inputs, Nil)
      .groupBy(col(Id), col("k"), col(Sample))
      .agg(avg(col("y")).as("y"))
    val count = coalitions.masks.length
    val solve = udf { (values: Seq[Row]) =>
      val ys = new Array[Double](count)
      values.foreach(r => ys(r.getInt(0)) = r.getDouble(1))
      val fit = KernelShap.explain(coalitions, ys)
      (fit.coefficients.toSeq, fit.r2)
    }
    output(stage, input, fitted(scored, solve, col(Sample)))
  }

  /** LIME for every row: `numSamples` samples per row (the first is the row itself), `sampled`
    * giving the model's input columns of a sample and its representation `Rep` (array<double>, the
    * features the local model is fitted on), and `distance2(rep)` its squared distance to the row.
    */
  def lime(
      stage: ExplainerParams with LIMEParams,
      data: DataFrame,
      features: Int,
      required: Seq[String],
      sampled: Seq[(String, Column)],
      categorical: Array[Boolean]
  ): DataFrame = limeOf(stage, data, required, sampled, j => categorical(j), _ => features)

  /** LIME as [[lime]] does it, for representations whose length may differ between rows (the tokens
    * of a text): `categorical(j)` tells whether feature j is a presence indicator (distance 1
    *   - rep), and the kernel's default width is 0.75 * sqrt(`features(length of the rep)`).
    */
  def limeOf(
      stage: ExplainerParams with LIMEParams,
      data: DataFrame,
      required: Seq[String],
      sampled: Seq[(String, Column)],
      categorical: Int => Boolean,
      features: Int => Int
  ): DataFrame = {
    val model = stage.explainedModel
    val fixedWidth = if (stage.isDefined(stage.kernelWidth)) Some(stage.getKernelWidth) else None
    val lambda = stage.getRegularization
    val input = indexed(stage, data)
    val samples = complete(input, required).withColumn(
      Sample,
      explode(sequence(lit(0), lit(stage.getNumSamples - 1)))
    )
    val inputs = sampled.foldLeft(samples) { case (df, (name, c)) => df.withColumn(name, c) }
    val scored = score(stage, model, inputs, Seq(Rep))
    val solve = udf { (rows: Seq[Row]) =>
      val x = rows.map(_.getSeq[Double](0).toArray).toArray
      val y = rows.map(_.getDouble(1)).toArray
      val width = fixedWidth.getOrElse(0.75 * math.sqrt(features(x.headOption.fold(0)(_.length))))
      val w = x.map { rep =>
        val d2 = rep.indices.map { j =>
          val d = if (categorical(j)) 1.0 - rep(j) else rep(j)
          d * d
        }.sum
        math.sqrt(math.exp(-d2 / (width * width)))
      }
      val fit = LocalFits.ridge(x, y, w, lambda)
      (fit.coefficients.toSeq, fit.r2)
    }
    output(stage, input, fitted(scored, solve, col(Rep)))
  }

  /** Each row's local fit per target class: `solve` (giving the coefficients and r2) over the
    * class's scored samples, each as (`sample`, its score y).
    */
  def fitted(scored: DataFrame, solve: UserDefinedFunction, sample: Column): DataFrame =
    scored
      .groupBy(col(Id), col("k"))
      .agg(solve(collect_list(struct(sample, col("y")))).as("fit"))
      .select(
        col(Id),
        col("k"),
        col("fit").getField("_1").as("coefficients"),
        col("fit").getField("_2").as("r2")
      )

  /** A standard normal draw per sample for feature `j`, 0 for the row itself (sample 0). */
  def normal(j: Int): Column = when(col(Sample) === 0, lit(0.0)).otherwise(randn(Seed + j))

  /** A uniform draw per sample for feature `j`. */
  def uniform(j: Int): Column = rand(Seed + 10007L + j)
}
