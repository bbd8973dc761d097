package mmlspark.codegen

// The shared params of mmlspark, as data (the approach of Spark's `SharedParamsCodeGen`).
//
// This file is compiled twice: into the sbt build, whose source generator writes the Scala traits
// (`HasX` in `mmlspark.contracts`) before the library compiles, and into the `codegen` project,
// which writes the Python mixins (`mmlspark/core/shared_params.py`) from the same rows. It needs
// nothing from the library, so a new row is a new trait on the next compile, with no manual step.
// It must compile with the build's Scala 2.12 and the library's 2.13.

/** How one param value type is written in Scala and in Python. Only Spark Connect-safe types have a
  * row (numbers, strings, booleans and arrays of those, plus pipeline stages for meta-estimators),
  * so Python never receives a param it cannot convert.
  */
final case class ParamType(
    scalaType: String,
    scalaParamClass: String,
    pythonType: String,
    pythonConverter: String
)

object ParamType {
  val string = ParamType("String", "Param[String]", "str", "TypeConverters.toString")
  val int = ParamType("Int", "IntParam", "int", "TypeConverters.toInt")
  val long = ParamType("Long", "LongParam", "int", "TypeConverters.toInt")
  val float = ParamType("Float", "FloatParam", "float", "TypeConverters.toFloat")
  val double = ParamType("Double", "DoubleParam", "float", "TypeConverters.toFloat")
  val boolean = ParamType("Boolean", "BooleanParam", "bool", "TypeConverters.toBoolean")
  val stringArray =
    ParamType("Array[String]", "StringArrayParam", "list[str]", "TypeConverters.toListString")
  val intArray = ParamType("Array[Int]", "IntArrayParam", "list[int]", "TypeConverters.toListInt")
  val doubleArray =
    ParamType("Array[Double]", "DoubleArrayParam", "list[float]", "TypeConverters.toListFloat")
  val stage = ParamType("PipelineStage", "StageParam", "JavaParams", "to_stage")
  val stageArray =
    ParamType("Array[PipelineStage]", "StageArrayParam", "list[JavaParams]", "to_stages")

  val all: Seq[ParamType] = Seq(
    string,
    int,
    long,
    float,
    double,
    boolean,
    stringArray,
    intArray,
    doubleArray,
    stage,
    stageArray
  )
}

/** One shared param: a trait `HasX` in Scala and a mixin `HasX` in Python. Each stage sets its own
  * default with `setDefault`; a row holds meaning and validity only, and its doc never states a
  * default (the generated Python docs render each stage's real one).
  */
final case class SharedParam(
    name: String,
    paramType: ParamType,
    doc: String,
    validator: Option[String] = None
) {
  def traitName: String = "Has" + name.capitalize

  /** The Scala members of this param: the `final val`, its getter and its setter. */
  def scalaMembers: String = {
    val t = paramType
    val validator = this.validator.map(v => s", $v").getOrElse("")
    val escaped = doc.replace("\\", "\\\\").replace("\"", "\\\"")
    s"""  /** Param for $doc. */
       |  final val $name: ${t.scalaParamClass} =
       |    new ${t.scalaParamClass}(this, "$name", "$escaped"$validator)
       |
       |  final def get${name.capitalize}: ${t.scalaType} = $$($name)
       |
       |  def set${name.capitalize}(value: ${t.scalaType}): this.type = set($name, value)
       |""".stripMargin
  }
}

/** The validators of the rows: Scala code the generated traits hold, building a
  * `mmlspark.contracts.Check` (a validator as data, which the code generator writes into the Python
  * wrappers as the same check) wherever the rule is one of its kinds; any other code is a plain
  * Scala validator, which only the JVM applies.
  */
object Validators {
  val nonEmptyName = Some("Check.NonEmptyName")
  val nonEmptyNames = Some("Check.NonEmptyNames")
  val distinctNames = Some("Check.DistinctNames")
  val someDistinctNames = Some("Check.All(Check.NotEmpty, Check.DistinctNames)")
  val someNonEmptyNames = Some("Check.All(Check.NotEmpty, Check.NonEmptyNames)")
  def gtEq(bound: Int): Option[String] = Some(s"Check.AtLeast($bound)")
  def gt(bound: Double): Option[String] = Some(s"Check.Above($bound)")
  val unitInterval = Some("Check.Between(0, 1)")
  def oneOf(values: String): Option[String] = Some(s"Check.OneOf($values)")
  def lengths(allowed: Int*): Option[String] = Some(
    s"Check.Lengths(Seq(${allowed.mkString(", ")}))"
  )
  def positiveLengths(allowed: Int*): Option[String] =
    Some(s"Check.Lengths(Seq(${allowed.mkString(", ")}), positive = true)")
}

object SharedParams {
  import Validators._

  /** The table: one row per shared param, in the order of the generated files. */
  val table: Seq[SharedParam] = Seq(
    SharedParam("inputCol", ParamType.string, "name of the input column", nonEmptyName),
    SharedParam("outputCol", ParamType.string, "name of the output column", nonEmptyName),
    SharedParam("inputCols", ParamType.stringArray, "names of the input columns", nonEmptyNames),
    SharedParam("outputCols", ParamType.stringArray, "names of the output columns", nonEmptyNames),
    SharedParam("labelCol", ParamType.string, "name of the label column", nonEmptyName),
    SharedParam("featuresCol", ParamType.string, "name of the features column", nonEmptyName),
    SharedParam("weightCol", ParamType.string, "name of the weight column", nonEmptyName),
    SharedParam(
      "errorCol",
      ParamType.string,
      "name of the column that receives a row's error message (null when the row succeeded)",
      nonEmptyName
    ),
    SharedParam(
      "miniBatchSize",
      ParamType.int,
      "number of rows grouped into one batch (at least 1)",
      gtEq(1)
    ),
    SharedParam(
      "predictionCol",
      ParamType.string,
      "name of the column with the predicted class or value",
      nonEmptyName
    ),
    SharedParam(
      "reducedDecode",
      ParamType.boolean,
      "when the input is encoded image bytes (binary), or the image of read_images read at full " +
        "size (its files are then decoded again from the image's origin): decode each JPEG at " +
        "the smallest of 1/8, 1/4, 1/2 and full scale that still covers the first resize's " +
        "size, when only pixel-wise operations come before it (much faster and smaller for " +
        "large photos; the pixels differ slightly from a full decode followed by the same " +
        "resize). False: decode at full size"
    ),
    SharedParam(
      "tensorChannelOrder",
      ParamType.string,
      "channel order of the tensor: 'RGB' or 'BGR' (any case)",
      Some("Choices.channelOrder.isValid")
    )
  )

  val header = "Code generated by mmlspark codegen from the shared param table. DO NOT EDIT."

  /** The Scala traits of `rows`, the source of `mmlspark/contracts/SharedParams.scala`. */
  def scalaSource(rows: Seq[SharedParam] = table): String = {
    val traits = rows.map { p =>
      s"""/** Trait for shared param `${p.name}`: ${p.doc}. */
         |trait ${p.traitName} extends Params {
         |
         |${p.scalaMembers}}
         |""".stripMargin
    }
    s"""// $header
       |package mmlspark.contracts
       |
       |import org.apache.spark.ml.PipelineStage
       |import org.apache.spark.ml.param._
       |
       |// format: off
       |${traits.mkString("\n")}""".stripMargin
  }
}
