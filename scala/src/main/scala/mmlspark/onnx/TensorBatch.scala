package mmlspark.onnx

import java.nio.{ByteBuffer, ByteOrder}

import ai.onnxruntime.{OnnxTensor, OrtEnvironment}
import ai.onnxruntime.platform.Fp16Conversions
import mmlspark.onnx.ElementType._
import org.apache.spark.ml.mmlspark.SparkInternals
import org.apache.spark.ml.mmlspark.SparkInternals.{ArrayData, UnsafeArrayData}
import org.apache.spark.ml.linalg.{DenseVector, Vector}
import org.apache.spark.sql.types._

/** The input tensors of one run, filled from rows into direct, native-order buffers that are reused
  * run after run (ONNX Runtime reads them in place). A buffer is sized for the rows of the batch at
  * hand, grown when a larger batch comes, and freed at once when replaced or [[release]]d, never
  * left to the garbage collector. Not thread-safe: one per task.
  */
final class TensorBatch(feeds: Seq[Feed]) {

  private val buffers = new Array[ByteBuffer](feeds.length)
  private val addresses = new Array[Long](feeds.length)
  private val strings = new Array[Array[String]](feeds.length)

  /** Bytes of direct memory the buffers hold now. */
  def allocated: Long = buffers.iterator.filter(_ != null).map(_.capacity().toLong).sum

  /** Prepares room for `rows` rows of the per-row `shapes` (one per feed). */
  def reserve(rows: Int, shapes: Seq[Seq[Long]]): Unit = feeds.indices.foreach { f =>
    val feed = feeds(f)
    val perRow = shapes(f).product
    val elements = rows.toLong * perRow
    if (feed.element == Str) {
      if (elements > TensorBatch.MaxArray)
        throw TensorBatch.tooLarge(feed, rows, elements, "values", TensorBatch.MaxArray)
      if (strings(f) == null || strings(f).length < elements) {
        strings(f) = null
        strings(f) = new Array[String](elements.toInt)
      }
    } else {
      val bytes = BigInt(elements) * feed.element.bytes
      if (bytes > TensorBatch.MaxBuffer)
        throw TensorBatch.tooLarge(feed, rows, bytes, "bytes", TensorBatch.MaxBuffer)
      if (buffers(f) == null || buffers(f).capacity() < bytes) {
        free(f)
        buffers(f) = ByteBuffer.allocateDirect(bytes.toInt).order(ByteOrder.nativeOrder())
        addresses(f) = TensorBatch.address(buffers(f))
      }
    }
  }

  private def free(f: Int): Unit = {
    val buffer = buffers(f)
    buffers(f) = null
    addresses(f) = 0L
    if (buffer != null) TensorBatch.free(buffer)
  }

  /** Frees every buffer now (the next [[reserve]] allocates again). */
  def release(): Unit = feeds.indices.foreach { f =>
    free(f)
    strings(f) = null
  }

  /** Writes the value of feed `f` for the row at position `row` (`count` elements per row). */
  def fill(f: Int, row: Int, count: Long, value: Any): Unit = {
    val feed = feeds(f)
    val start = row * count
    if (feed.element == Str)
      TensorBatch.fillStrings(value, feed.columnType, strings(f), start.toInt)
    else {
      val written = TensorBatch.fillNumbers(
        value,
        feed.columnType,
        feed.element,
        buffers(f),
        addresses(f),
        start * feed.element.bytes
      )
      require(written == count, s"wrote $written of $count values")
    }
  }

  /** Fills rows `from` until `until` of feed `f` (`count` elements per row) with zeros (empty
    * strings): the padding of a batch run at a fixed size.
    */
  def zero(f: Int, from: Int, until: Int, count: Long): Unit = {
    val feed = feeds(f)
    if (feed.element == Str)
      java.util.Arrays.fill(
        strings(f).asInstanceOf[Array[AnyRef]],
        (from * count).toInt,
        (until * count).toInt,
        ""
      )
    else {
      val bytes = feed.element.bytes.toLong
      SparkInternals.setMemory(
        addresses(f) + from * count * bytes,
        0.toByte,
        (until - from) * count * bytes
      )
    }
  }

  /** The tensor of feed `f` for `rows` rows of shape `rowShape`; `batched` adds the batch
    * dimension. The caller closes it before the buffers are refilled.
    */
  def tensor(
      env: OrtEnvironment,
      f: Int,
      rows: Int,
      rowShape: Seq[Long],
      batched: Boolean
  ): OnnxTensor = {
    val shape = (if (batched) rows.toLong +: rowShape else rowShape).toArray
    val count = Math.toIntExact(rows * rowShape.product)
    val element = feeds(f).element
    if (element == Str)
      OnnxTensor.createTensor(env, java.util.Arrays.copyOf(strings(f), count), shape)
    else {
      val view = buffers(f).duplicate().order(ByteOrder.nativeOrder())
      view.position(0).limit(count * element.bytes)
      element match {
        case Float32 => OnnxTensor.createTensor(env, view.asFloatBuffer(), shape)
        case Float64 => OnnxTensor.createTensor(env, view.asDoubleBuffer(), shape)
        case Int16 => OnnxTensor.createTensor(env, view.asShortBuffer(), shape)
        case Float16 | BFloat16 =>
          OnnxTensor.createTensor(env, view.asShortBuffer(), shape, element.javaType)
        case Int32 => OnnxTensor.createTensor(env, view.asIntBuffer(), shape)
        case Int64 => OnnxTensor.createTensor(env, view.asLongBuffer(), shape)
        case Int8 | UInt8 | Bool => OnnxTensor.createTensor(env, view, shape, element.javaType)
        case Str => throw new IllegalStateException("strings are not buffered")
      }
    }
  }
}

object TensorBatch {

  /** The most bytes one direct buffer can hold (its capacity is an Int). */
  val MaxBuffer: Long = Int.MaxValue.toLong - 8

  /** The most elements one JVM array can hold. */
  val MaxArray: Long = Int.MaxValue.toLong - 8

  /** The error of a batch (or row) too large for one buffer: names the input, its size and the
    * limit. A batch of several rows is retried row by row, so the message a row gets is per row.
    */
  private def tooLarge(
      feed: Feed,
      rows: Int,
      amount: BigInt,
      unit: String,
      limit: Long
  ): IllegalArgumentException = {
    def show(n: BigInt) = if (unit == "bytes") Bytes.show(n) else s"$n values"
    val limitText = if (unit == "bytes") Bytes.show(BigInt(limit)) else s"$limit values"
    new IllegalArgumentException(
      if (rows == 1)
        s"input '${feed.spec.name}' (from column '${feed.column}') is ${show(amount)} per row, " +
          s"over the limit of $limitText that one ONNX Runtime input tensor can hold"
      else
        s"input '${feed.spec.name}' is ${show(amount)} for a batch of $rows rows, over the limit " +
          s"of $limitText that one ONNX Runtime input tensor can hold"
    )
  }

  // Frees a direct buffer's memory now (the JDK's own Unsafe.invokeCleaner, the one supported
  // way); without it the memory stays reserved until a garbage collection finds the buffer.
  private val invokeCleaner: ByteBuffer => Unit = {
    val unsafeClass = Class.forName("sun.misc.Unsafe")
    val field = unsafeClass.getDeclaredField("theUnsafe")
    field.setAccessible(true)
    val unsafe = field.get(null)
    val method = unsafeClass.getMethod("invokeCleaner", classOf[ByteBuffer])
    buffer => method.invoke(unsafe, buffer)
  }

  def free(buffer: ByteBuffer): Unit = invokeCleaner(buffer)

  private val addressField = {
    val field = classOf[java.nio.Buffer].getDeclaredField("address")
    field.setAccessible(true) // needs --add-opens java.base/java.nio, which Spark requires anyway
    field
  }

  def address(buffer: ByteBuffer): Long = addressField.getLong(buffer)

  /** The Spark type whose values have exactly the bytes of `e`'s values, for plain copies. */
  private def sameBytes(e: ElementType): DataType = e match {
    case Float32 => FloatType
    case Float64 => DoubleType
    case Int8 | UInt8 => ByteType
    case Int16 => ShortType
    case Int32 => IntegerType
    case Int64 => LongType
    case Bool => BooleanType
    case _ => NullType
  }

  /** Writes the elements of `value` (a column value of type `t`) as `e` into `buffer` from byte
    * `offset` on; returns how many it wrote. Arrays of the matching type are copied with one
    * memcpy; other types are converted element by element, without boxing.
    */
  def fillNumbers(
      value: Any,
      t: DataType,
      e: ElementType,
      buffer: ByteBuffer,
      address: Long,
      offset: Long
  ): Long =
    (value, t) match {
      case (a: ArrayData, ArrayType(inner: ArrayType, _)) =>
        var written = 0L
        var i = 0
        while (i < a.numElements()) {
          written += fillNumbers(
            a.getArray(i),
            inner,
            e,
            buffer,
            address,
            offset + written * e.bytes
          )
          i += 1
        }
        written
      case (a: ArrayData, ArrayType(elementType, containsNull)) =>
        val n = a.numElements()
        if (containsNull) requireNoNulls(a)
        a match {
          case u: UnsafeArrayData if sameBytes(e) == elementType && e != Bool =>
            val header = SparkInternals.unsafeArrayHeaderBytes(n)
            SparkInternals.copyMemory(
              u.getBaseObject,
              u.getBaseOffset + header,
              null,
              address + offset,
              n.toLong * e.bytes
            )
          case _ => convert(elementType, a, n, e, buffer, offset)
        }
        n
      case (v: Vector, _) =>
        val values = v match {
          case d: DenseVector => d.values
          case sparse => sparse.toArray
        }
        if (e == Float64)
          SparkInternals.copyMemory(
            values,
            SparkInternals.DoubleArrayOffset,
            null,
            address + offset,
            values.length * 8L
          )
        else {
          val data = SparkInternals.toArrayData(values)
          convert(DoubleType, data, values.length, e, buffer, offset)
        }
        values.length
      case (b: Array[Byte], BinaryType) =>
        if (e == Int8 || e == UInt8)
          SparkInternals.copyMemory(
            b,
            SparkInternals.ByteArrayOffset,
            null,
            address + offset,
            b.length.toLong
          )
        else { // bytes are pixel values: unsigned
          var i = 0
          while (i < b.length) {
            putDouble(e, buffer, offset + i.toLong * e.bytes, (b(i) & 0xff).toDouble)
            i += 1
          }
        }
        b.length
      case (scalar, _) =>
        scalar match {
          case x: java.lang.Boolean => putLong(e, buffer, offset, if (x) 1L else 0L)
          case x: java.lang.Float => putDouble(e, buffer, offset, x.toDouble)
          case x: java.lang.Double => putDouble(e, buffer, offset, x)
          case x: java.lang.Number => putLong(e, buffer, offset, x.longValue())
          case other =>
            throw new IllegalArgumentException(
              s"cannot feed ${other.getClass.getSimpleName} as ${e.name}"
            )
        }
        1
    }

  /** Fails for an array with a null element; an UnsafeArrayData's null bits are checked a word (64
    * elements) at a time.
    */
  private def requireNoNulls(a: ArrayData): Unit = {
    val n = a.numElements()
    val anyNull = a match {
      case u: UnsafeArrayData => SparkInternals.hasNullElement(u)
      case _ => true
    }
    if (anyNull) {
      var i = 0
      while (i < n) {
        if (a.isNullAt(i))
          throw new IllegalArgumentException(TensorMessages.NullElement("index" -> i))
        i += 1
      }
    }
  }

  /** Element-wise conversion of `n` values of Spark type `from` to `e`. */
  private def convert(
      from: DataType,
      a: ArrayData,
      n: Int,
      e: ElementType,
      buffer: ByteBuffer,
      offset: Long
  ): Unit = {
    var i = 0
    from match {
      case FloatType | DoubleType =>
        val get: Int => Double = if (from == FloatType) a.getFloat(_).toDouble else a.getDouble
        while (i < n) { putDouble(e, buffer, offset + i.toLong * e.bytes, get(i)); i += 1 }
      case BooleanType =>
        while (i < n) {
          putLong(e, buffer, offset + i.toLong * e.bytes, if (a.getBoolean(i)) 1L else 0L); i += 1
        }
      case _ =>
        val get: Int => Long = from match {
          case ByteType => a.getByte(_).toLong
          case ShortType => a.getShort(_).toLong
          case IntegerType => a.getInt(_).toLong
          case _ => a.getLong
        }
        while (i < n) { putLong(e, buffer, offset + i.toLong * e.bytes, get(i)); i += 1 }
    }
  }

  private def putDouble(e: ElementType, b: ByteBuffer, at: Long, v: Double): Unit = {
    val i = at.toInt
    e match {
      case Float32 => b.putFloat(i, v.toFloat)
      case Float64 => b.putDouble(i, v)
      case Float16 => b.putShort(i, Fp16Conversions.floatToFp16(v.toFloat))
      case BFloat16 => b.putShort(i, Fp16Conversions.floatToBf16(v.toFloat))
      case Bool => b.put(i, if (v != 0) 1.toByte else 0.toByte)
      case _ => putLong(e, b, at, v.toLong)
    }
  }

  private def putLong(e: ElementType, b: ByteBuffer, at: Long, v: Long): Unit = {
    val i = at.toInt
    e match {
      case Int8 | UInt8 => b.put(i, v.toByte)
      case Int16 => b.putShort(i, v.toShort)
      case Int32 => b.putInt(i, v.toInt)
      case Int64 => b.putLong(i, v)
      case Bool => b.put(i, if (v != 0) 1.toByte else 0.toByte)
      case _ => putDouble(e, b, at, v.toDouble)
    }
  }

  def fillStrings(value: Any, t: DataType, out: Array[String], start: Int): Unit =
    (value, t) match {
      case (a: ArrayData, ArrayType(inner: ArrayType, _)) =>
        var at = start
        var i = 0
        while (i < a.numElements()) {
          val child = a.getArray(i)
          fillStrings(child, inner, out, at)
          at += Feed.nestedShape(child, inner).product.toInt
          i += 1
        }
      case (a: ArrayData, ArrayType(StringType, _)) =>
        var i = 0
        while (i < a.numElements()) {
          if (a.isNullAt(i))
            throw new IllegalArgumentException(TensorMessages.NullElement("index" -> i))
          out(start + i) = a.getUTF8String(i).toString
          i += 1
        }
      case (s: String, _) => out(start) = s
      case (other, _) => throw new IllegalArgumentException(s"cannot feed $other as string")
    }
}
