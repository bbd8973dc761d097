package mmlspark.featurize

import mmlspark.contracts.{SchemaUtils, StageReadable, StageWritable}
import org.apache.spark.ml.Transformer
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{DataFrame, Dataset}
import org.apache.spark.sql.functions.{call_function, col, expr, lit}
import org.apache.spark.sql.types._

/** Converts each of `cols`, in place, to what `convertTo` names: a Spark SQL type (a value the type
  * cannot hold, such as text that is no number, becomes null instead of failing the job; a
  * timestamp becomes epoch milliseconds as a long, or text in `dateTimeFormat` as a string), the
  * indices of [[ValueIndexer]] with its levels in the column's metadata (`toCategorical`), the
  * values such an index names (`clearCategorical`, as [[IndexToValue]]), or a timestamp read from
  * text in `dateTimeFormat` or from epoch milliseconds (`date`).
  */
final class DataConversion(override val uid: String)
    extends Transformer
    with DataConversionDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("DataConversion"))

  setDefault(dateTimeFormat -> "yyyy-MM-dd HH:mm:ss")

  /** The type `convertTo` casts to, for the targets that are types. */
  private def castType: Option[DataType] = DataConversion.castTypes.get($(convertTo))

  /** The converted field for `field`, or a failure naming what the target takes. */
  private def converted(schema: StructType, field: StructField): StructField = {
    val target = $(convertTo)
    def refuse(expected: String): Nothing = {
      SchemaUtils.require(
        this,
        condition = false,
        FeaturizeMessages.NoConversion(
          "target" -> target,
          "expected" -> expected,
          "column" -> field.name,
          "actual" -> field.dataType.catalogString
        )
      )
      throw new IllegalStateException("unreachable")
    }
    (target, field.dataType) match {
      case ("toCategorical", t) =>
        if (!ValueIndexer.indexable(t)) refuse(ValueIndexer.Indexable)
        field.copy(dataType = IntegerType, nullable = false)
      case ("clearCategorical", _) =>
        val (_, valueType) = IndexToValue.levels(this, schema, field.name)
        field.copy(dataType = valueType, nullable = true, metadata = Metadata.empty)
      case ("date", StringType | LongType) =>
        field.copy(dataType = TimestampType, nullable = true, metadata = Metadata.empty)
      case ("date", _) => refuse(DataConversion.DateSources)
      case (_, TimestampType) =>
        if (target != "long" && target != "string") refuse(DataConversion.CastSources)
        field.copy(dataType = castType.get, nullable = true, metadata = Metadata.empty)
      case (_, t) if DataConversion.castable(t) =>
        field.copy(dataType = castType.get, nullable = true, metadata = Metadata.empty)
      case _ => refuse(DataConversion.CastSources)
    }
  }

  override def transformSchema(schema: StructType): StructType = {
    SchemaUtils.require(this, isDefined(cols), FeaturizeMessages.ParamNotSet("param" -> "cols"))
    SchemaUtils.require(
      this,
      isDefined(convertTo),
      FeaturizeMessages.ParamNotSet("param" -> "convertTo")
    )
    val fields = $(cols).map(c => SchemaUtils.requireColumn(this, schema, c))
    val byName = fields.map(f => f.name -> converted(schema, f)).toMap
    StructType(schema.fields.map(f => byName.getOrElse(f.name, f)))
  }

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    $(cols).foldLeft(dataset.toDF())(convert)
  }

  /** `df` with the column `name` converted. */
  private def convert(df: DataFrame, name: String): DataFrame = {
    val field = df.schema(name)
    val column = col(SchemaUtils.quoted(name))
    $(convertTo) match {
      case "toCategorical" =>
        val temporary = DataConversion.unused(df.schema, name)
        val model = new ValueIndexer(uid).setInputCol(name).setOutputCol(temporary).fit(df)
        val metadata = model.copy(ParamMap(model.outputCol -> name)).indexMetadata
        DataConversion.replace(model.transform(df), name, temporary, metadata)
      case "clearCategorical" =>
        val temporary = DataConversion.unused(df.schema, name)
        val values = new IndexToValue(uid).setInputCol(name).setOutputCol(temporary).transform(df)
        DataConversion.replace(values, name, temporary, Metadata.empty)
      case "date" if field.dataType == StringType =>
        val parsed = call_function("try_to_timestamp", column, lit($(dateTimeFormat)))
        df.withColumn(name, parsed)
      case "date" => df.withColumn(name, call_function("timestamp_millis", column))
      case "long" if field.dataType == TimestampType =>
        df.withColumn(name, call_function("unix_millis", column))
      case "string" if field.dataType == TimestampType =>
        df.withColumn(name, call_function("date_format", column, lit($(dateTimeFormat))))
      case _ =>
        // try_cast: a value the type cannot hold is null, with ANSI mode on or off.
        val sqlType = castType.get.sql
        df.withColumn(name, expr(s"try_cast(${SchemaUtils.quoted(name)} AS $sqlType)"))
    }
  }

  override def copy(extra: ParamMap): DataConversion = defaultCopy(extra)
}

object DataConversion extends StageReadable[DataConversion] {

  /** The Spark SQL type each type-valued target names (SynapseML's spellings). */
  val castTypes: Map[String, DataType] = Map(
    "boolean" -> BooleanType,
    "byte" -> ByteType,
    "short" -> ShortType,
    "integer" -> IntegerType,
    "long" -> LongType,
    "float" -> FloatType,
    "double" -> DoubleType,
    "string" -> StringType
  )

  val targets: Seq[String] =
    castTypes.keys.toSeq.sorted ++ Seq("toCategorical", "clearCategorical", "date")

  /** What the casts take, as errors name it. */
  val CastSources = "a numeric, boolean or string column (a timestamp converts to long or string)"

  val DateSources = "a string or long column"

  def castable(t: DataType): Boolean =
    t.isInstanceOf[NumericType] || t == BooleanType || t == StringType

  /** A column name not in `schema`, made from `name`. */
  def unused(schema: StructType, name: String): String =
    Iterator.from(0).map(i => s"__${name}_$i").find(n => !schema.fieldNames.contains(n)).get

  /** `df` with `name` replaced, in its place, by `temporary` (dropped) carrying `metadata`. */
  def replace(df: DataFrame, name: String, temporary: String, metadata: Metadata): DataFrame =
    df.withColumn(name, col(SchemaUtils.quoted(temporary)).as(name, metadata)).drop(temporary)
}
