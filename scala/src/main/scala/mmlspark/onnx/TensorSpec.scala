package mmlspark.onnx

import ai.onnxruntime.{MapInfo, NodeInfo, OnnxJavaType, SequenceInfo, TensorInfo}
import org.apache.spark.sql.types._
import org.json4s.{JArray, JInt, JObject, JString, JValue}

/** An ONNX tensor element type as mmlspark handles it: its name, its width in a native buffer, the
  * ONNX Runtime Java type tensors are made with, and the Spark type its values have in a column.
  */
sealed abstract class ElementType(
    val name: String,
    val bytes: Int,
    val javaType: OnnxJavaType,
    val sparkType: DataType
) extends Serializable { // its case objects travel in tasks (Scala 2.12 needs this for them)
  def isFloating: Boolean = false
  override def toString: String = name
}

object ElementType {
  case object Float32 extends ElementType("float", 4, OnnxJavaType.FLOAT, FloatType) {
    override def isFloating = true
  }
  case object Float64 extends ElementType("double", 8, OnnxJavaType.DOUBLE, DoubleType) {
    override def isFloating = true
  }
  case object Float16 extends ElementType("float16", 2, OnnxJavaType.FLOAT16, FloatType) {
    override def isFloating = true
  }
  case object BFloat16 extends ElementType("bfloat16", 2, OnnxJavaType.BFLOAT16, FloatType) {
    override def isFloating = true
  }
  case object Int8 extends ElementType("int8", 1, OnnxJavaType.INT8, ByteType)
  // Spark has no unsigned types; uint8 values (0-255) come out as int.
  case object UInt8 extends ElementType("uint8", 1, OnnxJavaType.UINT8, IntegerType)
  case object Int16 extends ElementType("int16", 2, OnnxJavaType.INT16, ShortType)
  case object Int32 extends ElementType("int32", 4, OnnxJavaType.INT32, IntegerType)
  case object Int64 extends ElementType("int64", 8, OnnxJavaType.INT64, LongType)
  case object Bool extends ElementType("bool", 1, OnnxJavaType.BOOL, BooleanType)
  case object Str extends ElementType("string", 0, OnnxJavaType.STRING, StringType)

  val all: Seq[ElementType] =
    Seq(Float32, Float64, Float16, BFloat16, Int8, UInt8, Int16, Int32, Int64, Bool, Str)

  def of(javaType: OnnxJavaType): Option[ElementType] = all.find(_.javaType == javaType)
}

/** A model input or output: its name, element type (None for sequences, maps and element types
  * mmlspark cannot hold in a column), shape (-1 for a dynamic dimension) and dimension names (empty
  * for fixed dimensions). `mapOf` holds the key and value types of a sequence of maps, one map per
  * row: the output classifiers converted from scikit-learn and the like give by default (ZipMap).
  */
final case class TensorSpec(
    name: String,
    elementType: Option[ElementType],
    typeName: String,
    shape: Seq[Long],
    dimNames: Seq[String],
    mapOf: Option[(ElementType, ElementType)] = None
) {

  /** The first dimension is the batch: dynamic, or fixed at 1 (the model then runs row by row). */
  def batchDim: Option[Long] = shape.headOption.filter(d => d == -1L || d == 1L)

  /** The shape of one row's value: the shape without its batch dimension, if it has one. */
  def rowShape: Seq[Long] = if (batchDim.isDefined) shape.tail else shape

  def describe: String = s"'$name' ($typeName${shape
      .map(d => if (d < 0) "?" else d.toString)
      .mkString("[", ", ", "]")})"

  def toJson: JValue = JObject(
    "name" -> JString(name),
    "type" -> JString(typeName),
    "shape" -> JArray(shape.map(d => JInt(d)).toList),
    "dimNames" -> JArray(dimNames.map(JString(_)).toList)
  )
}

object TensorSpec {

  def of(name: String, info: NodeInfo): TensorSpec = info.getInfo match {
    case t: TensorInfo =>
      // ONNX Runtime Java holds unsigned types (uint16, uint32, uint64) in the signed Java type of
      // their width: the ONNX type decides, so that those are refused, not fed as signed values.
      val onnxName = t.onnxType.toString.toLowerCase.stripPrefix("onnx_tensor_element_data_type_")
      val element = ElementType.of(t.`type`).filter(_.name == onnxName)
      TensorSpec(
        name,
        element,
        element.map(_.name).getOrElse(onnxName),
        t.getShape.toSeq,
        Option(t.getDimensionNames).map(_.toSeq).getOrElse(Nil)
      )
    case s: SequenceInfo if s.sequenceOfMaps && s.mapInfo != null =>
      val types = for {
        key <- ElementType.of(s.mapInfo.keyType)
        value <- ElementType.of(s.mapInfo.valueType)
      } yield (key, value)
      val typeName = s"sequence<map<${s.mapInfo.keyType.toString.toLowerCase}," +
        s"${s.mapInfo.valueType.toString.toLowerCase}>>"
      TensorSpec(name, None, typeName, Nil, Nil, types)
    case _: SequenceInfo => TensorSpec(name, None, "sequence", Nil, Nil)
    case _: MapInfo => TensorSpec(name, None, "map", Nil, Nil)
    case other => TensorSpec(name, None, other.getClass.getSimpleName, Nil, Nil)
  }
}
