package mmlspark.pixels

import java.nio.{ByteBuffer, ByteOrder}

import mmlspark.contracts.ColumnKind
import org.apache.spark.ml.mmlspark.SparkInternals
import org.apache.spark.ml.image.ImageSchema
import org.apache.spark.sql.{Encoders, Row}
import org.apache.spark.sql.types.{DataType, StructType}
import org.opencv.core.{CvType, Mat}

/** A decoded image in Spark's image struct (`origin, height, width, nChannels, mode, data`): pixels
  * row-major with interleaved channels (BGR or BGRA order as OpenCV keeps them), `mode` the OpenCV
  * type code. 16-bit and float images store their samples little-endian.
  */
final case class ImageStruct(
    origin: String,
    height: Int,
    width: Int,
    nChannels: Int,
    mode: Int,
    data: Array[Byte]
)

object ImageSchemaUtils {

  /** Spark's image column type (the fields of `ImageSchema.columnSchema`, which
    * `pyspark.ml.image.ImageSchema` reads), as our stages produce it.
    */
  lazy val imageType: StructType = Encoders.product[ImageStruct].schema

  /** A column of images, for schema checks. */
  val ImageColumn: ColumnKind =
    ColumnKind("an image struct (origin, height, width, nChannels, mode, data)", isImage)

  /** Whether `dataType` has the fields of Spark's image struct (nullability aside). */
  def isImage(dataType: DataType): Boolean = dataType match {
    case s: StructType =>
      s.fields.map(f => f.name -> f.dataType) sameElements
        ImageSchema.columnSchema.fields.map(f => f.name -> f.dataType)
    case _ => false
  }

  private val nativeLittleEndian = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN

  /** The raw sample bytes of a continuous `mat`, in native order, copied with one memcpy (OpenCV's
    * `Mat.get` into a Java array is several times slower than decoding the image).
    */
  def rawBytes(mat: Mat): Array[Byte] = {
    val length = mat.total() * mat.elemSize()
    if (length > MaxRowBytes) {
      throw new UndecodableImageException(
        s"a ${mat.cols()}x${mat.rows()} image of ${mat.elemSize()} bytes per pixel needs " +
          s"$length bytes, more than the $MaxRowBytes a Spark row can hold"
      )
    }
    if (!mat.isContinuous) {
      val copy = mat.clone()
      try return rawBytes(copy)
      finally copy.release()
    }
    val bytes = new Array[Byte](length.toInt)
    SparkInternals.copyMemory(null, mat.dataAddr(), bytes, SparkInternals.ByteArrayOffset, length)
    bytes
  }

  /** The largest array a JVM allocates, less room for the rest of the row. */
  val MaxRowBytes: Long = Int.MaxValue - 1024L

  /** The samples of a continuous CV_32F `mat`, copied with one memcpy. */
  def rawFloats(mat: Mat): Array[Float] = {
    require(
      mat.isContinuous && CvType.depth(mat.`type`()) == CvType.CV_32F,
      "rawFloats needs a continuous float Mat"
    )
    val length = Math.toIntExact(mat.total() * mat.channels())
    val floats = new Array[Float](length)
    SparkInternals.copyMemory(
      null,
      mat.dataAddr(),
      floats,
      SparkInternals.FloatArrayOffset,
      length * 4L
    )
    floats
  }

  /** Copies `mat` out of native memory into an image struct (the Mat stays owned by the caller). */
  def toStruct(mat: Mat, origin: String): ImageStruct = {
    val continuous = if (mat.isContinuous) mat else mat.clone()
    try {
      val depth = CvType.depth(continuous.`type`())
      val data =
        if (depth == CvType.CV_8U || depth == CvType.CV_8S || nativeLittleEndian)
          rawBytes(continuous)
        else bigEndianToLittle(continuous)
      ImageStruct(
        origin,
        continuous.rows(),
        continuous.cols(),
        continuous.channels(),
        continuous.`type`(),
        data
      )
    } finally if (continuous ne mat) continuous.release()
  }

  /** Samples of a multi-byte depth, written little-endian on a big-endian platform. */
  private def bigEndianToLittle(mat: Mat): Array[Byte] = {
    val elements = (mat.total() * mat.channels()).toInt
    CvType.depth(mat.`type`()) match {
      case CvType.CV_16U | CvType.CV_16S =>
        val shorts = new Array[Short](elements)
        mat.get(0, 0, shorts)
        val buffer = ByteBuffer.allocate(elements * 2).order(ByteOrder.LITTLE_ENDIAN)
        buffer.asShortBuffer().put(shorts)
        buffer.array()
      case CvType.CV_32F =>
        val floats = new Array[Float](elements)
        mat.get(0, 0, floats)
        val buffer = ByteBuffer.allocate(elements * 4).order(ByteOrder.LITTLE_ENDIAN)
        buffer.asFloatBuffer().put(floats)
        buffer.array()
      case _ =>
        throw new IllegalArgumentException(
          s"unsupported OpenCV depth ${CvType.typeToString(mat.`type`())}"
        )
    }
  }

  /** A new Mat holding the pixels of an image struct row; the caller releases it. The data's length
    * is checked before anything native is allocated.
    */
  def toMat(row: Row): Mat = {
    OpenCV.ensureLoaded()
    val height = row.getInt(1)
    val width = row.getInt(2)
    val mode = row.getInt(4)
    val data = row.getAs[Array[Byte]](5)
    val bytesPerSample = CvType.depth(mode) match {
      case CvType.CV_8U | CvType.CV_8S => 1
      case CvType.CV_16U | CvType.CV_16S => 2
      case CvType.CV_32F => 4
      case _ =>
        throw new IllegalArgumentException(
          RowMessages.UnsupportedMode("mode" -> mode, "type" -> CvType.typeToString(mode))
        )
    }
    val elements = height * width * CvType.channels(mode)
    val expected = elements.toLong * bytesPerSample
    require(
      data.length == expected,
      RowMessages.DataSize("found" -> data.length, "expected" -> expected)
    )
    val samples = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN)
    val mat = new Mat(height, width, mode)
    bytesPerSample match {
      case 1 => mat.put(0, 0, data)
      case 2 =>
        val shorts = new Array[Short](elements)
        samples.asShortBuffer().get(shorts)
        mat.put(0, 0, shorts)
      case _ =>
        val floats = new Array[Float](elements)
        samples.asFloatBuffer().get(floats)
        mat.put(0, 0, floats)
    }
    mat
  }
}
