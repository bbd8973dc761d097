package mmlspark.onnx

import java.nio.{ByteBuffer, ByteOrder}

import ai.onnxruntime.{OnnxTensor, OnnxValue, OrtEnvironment}
import ai.onnxruntime.platform.Fp16Conversions
import mmlspark.onnx.ElementType._
import org.apache.spark.ml.linalg.{DenseVector, Vector, Vectors}
import org.apache.spark.ml.linalg.SQLDataTypes.VectorType
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData
import org.apache.spark.sql.catalyst.util.ArrayData
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.bitset.BitSetMethods

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
      s"input column '$column' holds $count values (shape ${Feed.show(shape)}) but model input " +
        s"${spec.describe} needs ${Feed.show(rowTemplate)} per row"
    )
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
    case Str => "a string column or (nested) array of strings"
    case Bool => "a boolean or numeric column, or a (nested) array of them"
    case _ =>
      "a numeric column, a (nested) array of numbers, an ML vector or binary (bytes as uint8)"
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
          if (a.isNullAt(i)) throw new IllegalArgumentException(s"nested element $i is null")
          val s = nestedShape(a.getArray(i), inner)
          if (s != first)
            throw new IllegalArgumentException(
              s"ragged nested array: element 0 has shape ${show(first)}, element $i ${show(s)}"
            )
          i += 1
        }
        a.numElements().toLong +: first
      }
    case _ => Seq(a.numElements().toLong)
  }
}

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
            val header = UnsafeArrayData.calculateHeaderPortionInBytes(n)
            Platform.copyMemory(
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
          Platform.copyMemory(
            values,
            Platform.DOUBLE_ARRAY_OFFSET,
            null,
            address + offset,
            values.length * 8L
          )
        else {
          val data = ArrayData.toArrayData(values)
          convert(DoubleType, data, values.length, e, buffer, offset)
        }
        values.length
      case (b: Array[Byte], BinaryType) =>
        if (e == Int8 || e == UInt8)
          Platform.copyMemory(
            b,
            Platform.BYTE_ARRAY_OFFSET,
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
      case u: UnsafeArrayData =>
        BitSetMethods.anySet(u.getBaseObject, u.getBaseOffset + 8, (n + 63) / 64)
      case _ => true
    }
    if (anyNull) {
      var i = 0
      while (i < n) {
        if (a.isNullAt(i)) throw new IllegalArgumentException(s"array element $i is null")
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
          if (a.isNullAt(i)) throw new IllegalArgumentException(s"array element $i is null")
          out(start + i) = a.getUTF8String(i).toString
          i += 1
        }
      case (s: String, _) => out(start) = s
      case (other, _) => throw new IllegalArgumentException(s"cannot feed $other as string")
    }
}

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
    if (spec.rowShape.isEmpty) element.sparkType
    else if (asVector && element.isFloating) VectorType
    else ArrayType(element.sparkType, containsNull = false)

  /** Bytes of one row's value of an output whose per-row shape is fixed in the model (None for
    * dynamic shapes and strings, known only once the model ran).
    */
  def fixedRowBytes(spec: TensorSpec, element: ElementType): Option[BigInt] =
    if (element == Str || spec.rowShape.exists(_ < 0)) None
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
      maxBytesPerRow: Long
  ): Array[Any] = {
    val tensor = value match {
      case t: OnnxTensor => t
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
        val all = tensor.getFloatBuffer
        each { r =>
          val a = new Array[Float](per)
          all.get(r * per, a)
          if (scalar) a(0) else if (asVector) Vectors.dense(a.map(_.toDouble)) else a
        }
      case Float64 =>
        val all = tensor.getDoubleBuffer
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
        val all = tensor.getIntBuffer
        each { r =>
          val a = new Array[Int](per); all.get(r * per, a); if (scalar) a(0) else a
        }
      case Int64 =>
        val all = tensor.getLongBuffer
        each { r =>
          val a = new Array[Long](per); all.get(r * per, a); if (scalar) a(0) else a
        }
      case Str =>
        val flat = flatten(tensor.getValue).toArray
        each { r =>
          val a = flat.slice(r * per, (r + 1) * per)
          if (scalar) a(0) else scala.collection.immutable.ArraySeq.unsafeWrapArray(a)
        }
    }
    out
  }

  private def flatten(value: Any): Seq[String] = value match {
    case s: String => Seq(s)
    case a: Array[_] => a.toSeq.flatMap(flatten)
    case other => throw new IllegalStateException(s"unexpected string tensor value $other")
  }

  /** Softmax of a row's floats, computed stably in double precision. */
  def softMax(value: Any): Any = value match {
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
