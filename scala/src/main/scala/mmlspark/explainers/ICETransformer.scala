package mmlspark.explainers

import mmlspark.contracts.{SchemaUtils, StageParams, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.functions.{array_to_vector, vector_to_array}
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset, SparkSession}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types._

/** Individual conditional expectation (ICE) and partial dependence of a model on features: each row
  * is scored with each feature set in turn to each value of its grid (the most frequent values of a
  * categorical feature, evenly spaced values over a numeric one's range), the other features kept.
  * `kind` "individual" adds to each row, per feature, a map from grid value to the vector of the
  * target classes' values; "average" gives one row of their means over the rows (partial
  * dependence); "feature" one row per feature with its partial-dependence-based importance.
  */
final class ICETransformer(override val uid: String)
    extends Transformer
    with ICETransformerDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("ICETransformer"))

  setDefault(
    targetCol -> "probability",
    targetClasses -> Array.empty[Int],
    kind -> "individual",
    categoricalFeatures -> Array.empty[String],
    numericFeatures -> Array.empty[String],
    numSplits -> 10,
    numTopValues -> 100,
    featureNameCol -> "featureNames",
    dependenceNameCol -> "pdpBasedDependence"
  )

  /** The features, categorical ones first, each checked against `schema`. */
  private def features(schema: StructType): Seq[ICEFeature] = {
    def parsed(settings: Array[String], categorical: Boolean): Seq[ICEFeature] =
      settings.toSeq.map { s =>
        ICEFeature.parse(s, categorical) match {
          case Right(feature) => feature
          case Left(reason) =>
            val keys = if (categorical) ICEFeature.CategoricalKeys else ICEFeature.NumericKeys
            SchemaUtils.require(
              this,
              condition = false,
              ExplainerMessages.BadFeature(
                "setting" -> s,
                "keys" -> keys.mkString(", "),
                "reason" -> reason
              )
            )
            throw new IllegalStateException("unreachable")
        }
      }
    val all = parsed($(categoricalFeatures), categorical = true) ++
      parsed($(numericFeatures), categorical = false)
    SchemaUtils.require(this, all.nonEmpty, ExplainerMessages.NoFeatures())
    SchemaUtils.requireDistinct(this, "the features", all.map(_.name))
    all.foreach {
      case f: ICECategoricalFeature =>
        SchemaUtils.requireColumnType(this, schema, f.name, ExplainerMessages.CategoricalType()) {
          case StringType | BooleanType | ByteType | ShortType | IntegerType | LongType => true
          case _ => false
        }
      case f: ICENumericFeature =>
        SchemaUtils.requireColumnType(this, schema, f.name, ExplainerMessages.NumericType())(
          SchemaUtils.isNumeric
        )
        for (low <- f.rangeMin; high <- f.rangeMax)
          SchemaUtils.require(
            this,
            low <= high,
            ExplainerMessages.EmptyRange("column" -> f.name, "min" -> low, "max" -> high)
          )
    }
    all
  }

  override def transformSchema(schema: StructType): StructType = {
    val all = features(schema)
    SchemaUtils.require(this, isDefined(model), ExplainerMessages.NoModel())
    val explained = SchemaUtils.requireTransformer(this, "model", $(model))
    ExplainerParams.checkTargets(
      this,
      schema,
      explained,
      $(targetCol),
      $(targetClasses),
      get(targetClassesCol)
    )
    def mapField(f: ICEFeature) =
      StructField(
        f.outputCol,
        MapType(schema(f.name).dataType, VectorType, valueContainsNull = true)
      )
    $(kind) match {
      case "individual" =>
        all.foreach(f => SchemaUtils.requireAbsent(this, schema, f.outputCol))
        SchemaUtils.requireDistinct(this, "the features' outputColName", all.map(_.outputCol))
        StructType(schema.fields ++ all.map(mapField))
      case "average" =>
        SchemaUtils.requireDistinct(this, "the features' outputColName", all.map(_.outputCol))
        StructType(all.map(mapField))
      case _ =>
        SchemaUtils.requireDistinct(
          this,
          "featureNameCol and dependenceNameCol",
          Seq($(featureNameCol), $(dependenceNameCol))
        )
        StructType(
          Seq(
            StructField($(featureNameCol), StringType, nullable = false),
            StructField($(dependenceNameCol), VectorType)
          )
        )
    }
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    val all = features(dataset.schema)
    val data = dataset.toDF()
    SchemaUtils.require(this, !data.isStreaming, ExplainerMessages.Streaming())
    val classesCol = if (isSet(targetClassesCol)) Some($(targetClassesCol)) else None
    val input = data
      .withColumn(Explaining.Id, monotonically_increasing_id())
      .withColumn(Explaining.Classes, Explaining.classesOf(classesCol, $(targetClasses)))
    val rows =
      if (isDefined(numSamples)) input.orderBy(rand(Explaining.Seed)).limit($(numSamples))
      else input
    val dependences = all.map(f => f -> dependence(rows, f, grid(data, f)))
    $(kind) match {
      case "individual" =>
        dependences
          .foldLeft(rows) { case (df, (f, scored)) =>
            df.join(individual(scored, f), Seq(Explaining.Id), "left")
          }
          .drop(Explaining.Id, Explaining.Classes)
      case "average" =>
        dependences
          .map { case (f, scored) => average(scored, f) }
          .reduce(_.crossJoin(_))
      case _ =>
        dependences
          .map { case (f, scored) => importance(scored, f) }
          .reduce(_.unionByName(_))
          .orderBy(desc(ICETransformer.First))
          .drop(ICETransformer.First)
    }
  }

  /** The values feature `f` takes, as literals of its column's type (SynapseML's grids: a numeric
    * feature's numSplits + 1 evenly spaced values over its range, each integer of the range for an
    * integer column with fewer, grid values of an integer column rounded; a categorical one's
    * numTopValues most frequent values, ties in the values' order).
    */
  private def grid(data: DataFrame, f: ICEFeature): Seq[Column] = {
    val c = Explaining.col(f.name)
    val dataType = data.schema(f.name).dataType
    val values: Seq[Any] = f match {
      case cat: ICECategoricalFeature =>
        data
          .filter(c.isNotNull)
          .groupBy(c.as("v"))
          .count()
          .orderBy(col("count").desc, col("v"))
          .limit(cat.numTopValues.getOrElse($(numTopValues)))
          .collect()
          .map(_.get(0))
          .toSeq
      case num: ICENumericFeature =>
        val range = data.agg(min(c).cast(DoubleType), max(c).cast(DoubleType)).head()
        val low = num.rangeMin.orElse(Option(range.get(0)).map(_.asInstanceOf[Double]))
        val high = num.rangeMax.orElse(Option(range.get(1)).map(_.asInstanceOf[Double]))
        (low, high) match {
          case (Some(lo), Some(hi)) =>
            ICETransformer.numericGrid(lo, hi, num.numSplits.getOrElse($(numSplits)), dataType)
          case _ => Nil
        }
    }
    values.map(v => lit(v).cast(dataType))
  }

  /** The rows with feature `f` set to each of `values`, scored: rows of the row's id, the value's
    * index [[ICETransformer.Index]] and itself ([[ICETransformer.Value]]), and the target classes'
    * values (array<double>, [[ICETransformer.Target]]).
    */
  private def dependence(rows: DataFrame, f: ICEFeature, values: Seq[Column]): DataFrame = {
    import ICETransformer._
    val expanded = rows
      .withColumn(Index, explode(array(values.indices.map(lit(_)): _*)))
      .withColumn(f.name, element_at(array(values: _*), col(Index) + 1))
      .withColumn(Value, Explaining.col(f.name))
    val scored = explainedModel.transform(expanded)
    scored.select(
      Explaining.col(Explaining.Id),
      col(Index),
      col(Value),
      Explaining.targets($(targetCol), scored).as(Target)
    )
  }

  private def explainedModel: Transformer = SchemaUtils.requireTransformer(this, "model", $(model))

  /** Per row, the map from feature `f`'s values to the target classes' values. */
  private def individual(scored: DataFrame, f: ICEFeature): DataFrame = {
    import ICETransformer._
    scored
      .groupBy(Explaining.col(Explaining.Id))
      .agg(
        array_sort(
          collect_list(struct(col(Index), col(Value), array_to_vector(col(Target)).as(Target))),
          byIndex
        ).as("s")
      )
      .select(
        Explaining.col(Explaining.Id),
        map_from_arrays(col("s").getField(Value), col("s").getField(Target)).as(f.outputCol)
      )
  }

  /** The mean over the rows of each target class's value, per value of feature `f`: rows of
    * [[ICETransformer.Index]], [[ICETransformer.Value]] and the vector [[ICETransformer.Target]].
    */
  private def means(scored: DataFrame): DataFrame = {
    import ICETransformer._
    val byClass = (l: Column, r: Column) =>
      when(l("k") < r("k"), -1).when(l("k") > r("k"), 1).otherwise(0)
    scored
      .select(col(Index), col(Value), posexplode(col(Target)).as(Seq("k", "y")))
      .groupBy(col(Index), col(Value), col("k"))
      .agg(avg(col("y")).as("y"))
      .groupBy(col(Index), col(Value))
      .agg(array_sort(collect_list(struct(col("k"), col("y"))), byClass).as("ys"))
      .select(col(Index), col(Value), array_to_vector(col("ys").getField("y")).as(Target))
  }

  private def average(scored: DataFrame, f: ICEFeature): DataFrame = {
    import ICETransformer._
    means(scored)
      .agg(array_sort(collect_list(struct(col(Index), col(Value), col(Target))), byIndex).as("s"))
      .select(map_from_arrays(col("s").getField(Value), col("s").getField(Target)).as(f.outputCol))
  }

  /** Feature `f`'s importance per target class: the sample standard deviation of its partial
    * dependence over the grid for a numeric feature (0 for one value), (maximum - minimum) / 4 for
    * a categorical one.
    */
  private def importance(scored: DataFrame, f: ICEFeature): DataFrame = {
    import ICETransformer._
    val pdp = means(scored).select(posexplode(vector_to_array(col(Target))).as(Seq("k", "y")))
    val y = col("y")
    val value = f match {
      case _: ICENumericFeature => coalesce(stddev_samp(y), lit(0.0))
      case _: ICECategoricalFeature => (max(y) - min(y)) / 4.0
    }
    val byClass = (l: Column, r: Column) =>
      when(l("k") < r("k"), -1).when(l("k") > r("k"), 1).otherwise(0)
    pdp
      .groupBy(col("k"))
      .agg(value.as("v"))
      .agg(array_sort(collect_list(struct(col("k"), col("v"))), byClass).as("s"))
      .select(
        lit(f.name).as($(featureNameCol)),
        array_to_vector(col("s").getField("v")).as($(dependenceNameCol)),
        element_at(col("s").getField("v"), 1).as(First)
      )
  }

  override def copy(extra: ParamMap): ICETransformer = {
    val copied = copyValues(new ICETransformer(uid), extra)
    StageParams.copyStages(this, copied, extra)
  }
}

object ICETransformer extends StageReadable[ICETransformer] {
  private val Index = Explaining.Prefix + "index"
  private val Value = Explaining.Prefix + "value"
  private val Target = Explaining.Prefix + "target"
  private val First = Explaining.Prefix + "first"

  private val byIndex = (l: Column, r: Column) =>
    when(l(Index) < r(Index), -1).when(l(Index) > r(Index), 1).otherwise(0)

  /** A numeric feature's grid from `low` to `high` (see [[ICETransformer]]). */
  private[explainers] def numericGrid(
      low: Double,
      high: Double,
      splits: Int,
      dataType: DataType
  ): Seq[Any] = dataType match {
    case ByteType | ShortType | IntegerType | LongType =>
      val (lo, hi) = (math.ceil(low).toLong, math.floor(high).toLong)
      if (hi - lo <= splits) (lo to hi).toSeq
      else (0 to splits).map(i => math.floor(low + (high - low) * i / splits + 0.5).toLong).distinct
    case _ => (0 to splits).map(i => low + (high - low) * i / splits)
  }

  override protected def create(uid: String, path: String, spark: SparkSession): ICETransformer =
    new ICETransformer(uid)
}
