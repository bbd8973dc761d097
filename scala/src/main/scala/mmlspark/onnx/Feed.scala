package mmlspark.onnx

import mmlspark.onnx.ElementType._
import org.apache.spark.ml.mmlspark.SparkInternals.ArrayData
import org.apache.spark.ml.linalg.Vector
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.sql.types._

/** How one model input is read from one column: which kinds of column fit which element types, and
  * the shape of one row's value (the model's per-row shape, with dynamic dimensions filled in from
  * the column's `tensorShape` metadata where it has them).
  */
final case class Feed(
    spec: TensorSpec,
    element: ElementType,
    column: String,
    ordinal: Int,
    columnType: DataType,
    rowTemplate: Seq[Long]
) {

  /** The shape of `value`'s tensor; fails (for this row only) when it cannot fit the model. */
  def rowShape(value: Any): Seq[Long] = {
    val shape: Seq[Long] = (value, columnType) match {
      case (a: ArrayData, t: ArrayType) => Feed.nestedShape(a, t)
      case (v: Vector, _) => Seq(v.size.toLong)
      case (b: Array[Byte], BinaryType) => Seq(b.length.toLong)
      case _ => Nil // a scalar
    }
    val count = shape.product
    val expected = rowTemplate.filter(_ >= 0).product
    val unknown = rowTemplate.count(_ < 0)
    def mismatch: Nothing = throw new IllegalArgumentException(
      TensorMessages.WrongCount(
        "column" -> column,
        "count" -> count,
        "shape" -> Feed.show(shape),
        "input" -> spec.describe,
        "template" -> Feed.show(rowTemplate)
      )
    )
    if (Feed.isTransposed(shape, rowTemplate)) {
      throw new IllegalArgumentException(
        TensorMessages.Transposed(
          "column" -> column,
          "shape" -> Feed.show(shape),
          "input" -> spec.describe,
          "template" -> Feed.show(rowTemplate)
        )
      )
    }
    if (shape.length == rowTemplate.length) {
      if (shape.zip(rowTemplate).exists { case (s, t) => t >= 0 && s != t }) {
        if (unknown == 0 && count == expected) rowTemplate else mismatch
      } else shape
    } else if (unknown == 0) {
      if (count == expected) rowTemplate else mismatch
    } else if (unknown == 1 && expected > 0 && count % expected == 0) {
      rowTemplate.map(d => if (d < 0) count / expected else d)
    } else mismatch
  }
}

object Feed {

  /** Whether `shape` does not fit the model's `template` (-1: any size) but another order of its
    * dimensions does: a layout mix-up (CHW against HWC, [3, ?, ?] against [224, 224, 3]) that a
    * reshape would hide, giving wrong outputs.
    */
  def isTransposed(shape: Seq[Long], template: Seq[Long]): Boolean =
    shape.nonEmpty && shape.length == template.length && shape.forall(_ >= 0) &&
      !fits(shape, template) && shape.permutations.exists(fits(_, template))

  private def fits(shape: Seq[Long], template: Seq[Long]): Boolean =
    shape.zip(template).forall { case (s, t) => t < 0 || s == t }

  def show(shape: Seq[Long]): String = shape
    .map(d => if (d < 0) "?" else d.toString)
    .mkString("[", ", ", "]")

  /** The innermost element type of a (nested) array type, and whether any level holds nulls. */
  def leaf(t: DataType): (DataType, Boolean) = t match {
    case ArrayType(inner, containsNull) =>
      val (l, n) = leaf(inner)
      (l, n || containsNull)
    case other => (other, false)
  }

  /** Whether a column of type `t` can feed elements of type `e`; describes the types that can. */
  def accepts(e: ElementType, t: DataType): Boolean = {
    val base = t match {
      case _: ArrayType => leaf(t)._1
      case v if v == VectorType => DoubleType
      case BinaryType => if (e == Str || e == Bool) NullType else ByteType
      case other => other
    }
    e match {
      case Str => base == StringType
      case Bool => base == BooleanType || base.isInstanceOf[NumericType]
      case _ => base.isInstanceOf[NumericType] && !base.isInstanceOf[DecimalType]
    }
  }

  def expected(e: ElementType): String = e match {
    case Str => PlanMessages.FeedStrings()
    case Bool => PlanMessages.FeedBooleans()
    case _ => PlanMessages.FeedNumbers()
  }

  /** The shape of a (nested) array value: its length, then the shape of its elements, which must
    * all be equal.
    */
  def nestedShape(a: ArrayData, t: ArrayType): Seq[Long] = t.elementType match {
    case inner: ArrayType =>
      val n = a.numElements()
      if (n == 0) Seq(0L)
      else {
        val first = nestedShape(a.getArray(0), inner)
        var i = 1
        while (i < n) {
          if (a.isNullAt(i))
            throw new IllegalArgumentException(TensorMessages.NullNested("index" -> i))
          val s = nestedShape(a.getArray(i), inner)
          if (s != first)
            throw new IllegalArgumentException(
              TensorMessages.Ragged("first" -> show(first), "index" -> i, "shape" -> show(s))
            )
          i += 1
        }
        a.numElements().toLong +: first
      }
    case _ => Seq(a.numElements().toLong)
  }
}
