package mmlspark.codegen

/** How one Scala param value type is written in Scala and in Python.
  *
  * Every param type a stage may use has a row here; the generator fails on any other, so Python
  * never receives a param it cannot convert (the Spark Connect-safe set: numbers, strings, booleans
  * and arrays of those, plus pipeline stages for meta-estimators).
  */
final case class ParamType(
    scalaType: String,
    scalaParamClass: String,
    pythonType: String,
    pythonConverter: String
)

object ParamTypes {
  val all: Seq[ParamType] = Seq(
    ParamType("String", "Param[String]", "str", "TypeConverters.toString"),
    ParamType("Int", "IntParam", "int", "TypeConverters.toInt"),
    ParamType("Long", "LongParam", "int", "TypeConverters.toInt"),
    ParamType("Float", "FloatParam", "float", "TypeConverters.toFloat"),
    ParamType("Double", "DoubleParam", "float", "TypeConverters.toFloat"),
    ParamType("Boolean", "BooleanParam", "bool", "TypeConverters.toBoolean"),
    ParamType("Array[String]", "StringArrayParam", "list[str]", "TypeConverters.toListString"),
    ParamType("Array[Int]", "IntArrayParam", "list[int]", "TypeConverters.toListInt"),
    ParamType("Array[Double]", "DoubleArrayParam", "list[float]", "TypeConverters.toListFloat"),
    ParamType("PipelineStage", "Param[PipelineStage]", "JavaParams", "to_stage"),
    ParamType(
      "Array[PipelineStage]",
      "Param[Array[PipelineStage]]",
      "list[JavaParams]",
      "to_stages"
    )
  )

  private val byJvmClass: Map[Class[_], ParamType] = Map(
    classOf[String] -> all(0),
    java.lang.Integer.TYPE -> all(1),
    java.lang.Long.TYPE -> all(2),
    java.lang.Float.TYPE -> all(3),
    java.lang.Double.TYPE -> all(4),
    java.lang.Boolean.TYPE -> all(5),
    classOf[Array[String]] -> all(6),
    classOf[Array[Int]] -> all(7),
    classOf[Array[Double]] -> all(8),
    classOf[org.apache.spark.ml.PipelineStage] -> all(9),
    classOf[Array[org.apache.spark.ml.PipelineStage]] -> all(10)
  )

  def of(scalaType: String): ParamType =
    all.find(_.scalaType == scalaType).getOrElse(sys.error(s"codegen: no ParamType '$scalaType'"))

  /** The type of a param, read from the return type of its getter. */
  def ofGetter(getterType: Class[_]): Option[ParamType] = byJvmClass.get(getterType)
}
