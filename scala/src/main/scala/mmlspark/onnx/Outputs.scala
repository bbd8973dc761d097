package mmlspark.onnx

import scala.jdk.CollectionConverters._

import ai.onnxruntime.{OnnxMap, OnnxSequence, OnnxTensor, OnnxValue}
import mmlspark.onnx.ElementType._
import org.apache.spark.ml.linalg.{Vector, Vectors}
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.sql.types._

/** An output too large for a row: every row of the batch gets this error, without a retry. */
final class OutputTooLarge(message: String) extends IllegalArgumentException(message)

/** Byte counts for people: binary units with one decimal ("400.0 MiB"). */
object Bytes {
  def show(bytes: BigInt): String = {
    val units = Seq("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    var value = bytes.toDouble
    var unit = 0
    while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1 }
    if (unit == 0) s"$bytes bytes"
    else "%.1f %s".formatLocal(java.util.Locale.ROOT, value, units(unit))
  }
}

/** Turns a fetched tensor into one value per row: a primitive array, a vector or a scalar. */
object Outputs {

  /** The Spark type of a fetched output's column. */
  def columnType(spec: TensorSpec, element: ElementType, asVector: Boolean): DataType =
    if (spec.mapOf.isDefined) {
      val (key, value) = spec.mapOf.get
      MapType(key.sparkType, value.sparkType, valueContainsNull = false)
    } else if (spec.rowShape.isEmpty) element.sparkType
    else if (asVector && element.isFloating) VectorType
    else ArrayType(element.sparkType, containsNull = false)

  /** Bytes of one row's value of an output whose per-row shape is fixed in the model (None for
    * dynamic shapes and strings, known only once the model ran).
    */
  def fixedRowBytes(spec: TensorSpec, element: ElementType): Option[BigInt] =
    if (element == Str || spec.mapOf.isDefined || spec.rowShape.exists(_ < 0)) None
    else Some(spec.rowShape.foldLeft(BigInt(element.bytes))(_ * _))

  /** The error every row of a batch gets when an output is larger per row than `limit` bytes. */
  def tooLarge(spec: TensorSpec, perRow: BigInt, limit: Long): OutputTooLarge =
    new OutputTooLarge(
      s"output '${spec.name}' is ${Bytes.show(perRow)} per row, over the limit of " +
        s"${Bytes.show(BigInt(limit))} (${RunLimits.MaxOutputBytesPerRowKey})"
    )

  /** The values of `value` for `rows` rows, split along its first (batch) dimension. Fails with
    * [[OutputTooLarge]], before anything is copied into the JVM heap, when a row's value is over
    * `maxBytesPerRow` bytes.
    */
  def perRow(
      value: OnnxValue,
      spec: TensorSpec,
      element: ElementType,
      rows: Int,
      asVector: Boolean,
      maxBytesPerRow: Long,
      written: Option[java.nio.Buffer] = None
  ): Array[Any] = {
    val tensor = value match {
      case t: OnnxTensor => t
      case maps: OnnxSequence if spec.mapOf.isDefined => return perRowMaps(maps, spec, rows)
      case other =>
        throw new IllegalStateException(
          s"model output '${spec.name}' is a ${other.getType}, not a tensor"
        )
    }
    val shape = tensor.getInfo.getShape
    val total = tensor.getInfo.getNumElements
    if (rows > 1 && (shape.isEmpty || shape(0) != rows))
      throw new IllegalStateException(
        s"model output '${spec.name}' has shape ${Feed.show(shape.toSeq)}, not $rows rows first"
      )
    val perElements = total / rows
    val perBytes = BigInt(perElements) * element.bytes
    if (perBytes > maxBytesPerRow) throw tooLarge(spec, perBytes, maxBytesPerRow)
    if (perElements > TensorBatch.MaxArray)
      throw new OutputTooLarge(
        s"output '${spec.name}' has $perElements values per row, over the limit of " +
          s"${TensorBatch.MaxArray} values that one row can hold"
      )
    if (BigInt(total) * element.bytes > TensorBatch.MaxBuffer)
      // Readable only in parts: the caller runs the rows one by one.
      throw new IllegalStateException(
        s"output '${spec.name}' is ${Bytes.show(BigInt(total) * element.bytes)} for a batch of " +
          s"$rows rows, over the ${Bytes.show(BigInt(TensorBatch.MaxBuffer))} one read can hold"
      )
    val per = perElements.toInt
    val scalar = spec.rowShape.isEmpty && per == 1
    val out = new Array[Any](rows)
    def each[A](read: Int => A): Unit = {
      var r = 0
      while (r < rows) { out(r) = read(r); r += 1 }
    }
    element match {
      case Float32 | Float16 | BFloat16 =>
        val all =
          written.collect { case b: java.nio.FloatBuffer => b }.getOrElse(tensor.getFloatBuffer)
        each { r =>
          val a = new Array[Float](per)
          all.get(r * per, a)
          if (scalar) a(0) else if (asVector) Vectors.dense(a.map(_.toDouble)) else a
        }
      case Float64 =>
        val all =
          written.collect { case b: java.nio.DoubleBuffer => b }.getOrElse(tensor.getDoubleBuffer)
        each { r =>
          val a = new Array[Double](per)
          all.get(r * per, a)
          if (scalar) a(0) else if (asVector) Vectors.dense(a) else a
        }
      case Int8 | UInt8 | Bool =>
        val all = tensor.getByteBuffer
        each { r =>
          val a = new Array[Byte](per)
          all.get(r * per, a)
          element match {
            case Int8 => if (scalar) a(0) else a
            case UInt8 => if (scalar) a(0) & 0xff else a.map(_ & 0xff)
            case _ => if (scalar) a(0) != 0 else a.map(_ != 0)
          }
        }
      case Int16 =>
        val all = tensor.getShortBuffer
        each { r =>
          val a = new Array[Short](per); all.get(r * per, a); if (scalar) a(0) else a
        }
      case Int32 =>
        val all = written.collect { case b: java.nio.IntBuffer => b }.getOrElse(tensor.getIntBuffer)
        each { r =>
          val a = new Array[Int](per); all.get(r * per, a); if (scalar) a(0) else a
        }
      case Int64 =>
        val all =
          written.collect { case b: java.nio.LongBuffer => b }.getOrElse(tensor.getLongBuffer)
        each { r =>
          val a = new Array[Long](per); all.get(r * per, a); if (scalar) a(0) else a
        }
      case Str =>
        val flat = flatten(tensor.getValue).toArray
        each { r =>
          val a = flat.slice(r * per, (r + 1) * per)
          if (scalar) a(0) else a.toSeq
        }
    }
    out
  }

  /** One map per row from a sequence of maps (ZipMap's output): keys and values as the column's
    * types (int64 keys as longs, floats as floats).
    */

  private def perRowMaps(maps: OnnxSequence, spec: TensorSpec, rows: Int): Array[Any] = {
    val values = maps.getValue
    if (values.size != rows)
      throw new IllegalStateException(
        s"model output '${spec.name}' holds ${values.size} maps, not one per row ($rows rows)"
      )
    val out = new Array[Any](rows)
    var r = 0
    while (r < rows) {
      out(r) = values.get(r) match {
        case m: OnnxMap => m.getValue.asScala.toMap
        case other =>
          throw new IllegalStateException(
            s"model output '${spec.name}' holds a ${other.getType}, not a map"
          )
      }
      r += 1
    }
    out
  }

  private def flatten(value: Any): Seq[String] = value match {
    case s: String => Seq(s)
    case a: Array[_] => a.toSeq.flatMap(flatten)
    case other => throw new IllegalStateException(s"unexpected string tensor value $other")
  }

  /** Softmax of a row's floats, computed stably in double precision; an ML vector with `asVector`,
    * else of the row's type.
    */
  def softMax(value: Any, asVector: Boolean): Any = value match {
    case a: Array[Float] if asVector => Vectors.dense(softMaxOf(a.map(_.toDouble)))
    case a: Array[Double] if asVector => Vectors.dense(softMaxOf(a))
    case a: Array[Float] => softMaxOf(a.map(_.toDouble)).map(_.toFloat)
    case a: Array[Double] => softMaxOf(a)
    case v: Vector => Vectors.dense(softMaxOf(v.toArray))
    case null => null
  }

  private def softMaxOf(x: Array[Double]): Array[Double] = {
    val max = if (x.isEmpty) 0.0 else x.max
    val e = x.map(v => math.exp(v - max))
    val sum = e.sum
    e.map(_ / sum)
  }

  /** Index of a row's largest value (the first one on ties), as a double. */
  def argMax(value: Any): Any = {
    val x = value match {
      case a: Array[Float] => a.map(_.toDouble)
      case a: Array[Double] => a
      case v: Vector => v.toArray
      case _ => null
    }
    if (x == null || x.isEmpty) null else java.lang.Double.valueOf(x.indices.maxBy(x(_)).toDouble)
  }
}
