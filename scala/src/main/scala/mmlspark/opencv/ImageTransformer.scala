package mmlspark.opencv

import scala.reflect.runtime.universe.TypeTag
import scala.util.control.NonFatal

import mmlspark.contracts.{
  Choices,
  ColumnKind,
  Deferred,
  DeferredColumns,
  HasReducedDecode,
  HasTensorChannelOrder,
  RowResults,
  RowwiseTransformer,
  SchemaUtils,
  StageReadable,
  StageWritable
}
import mmlspark.pixels.{
  ImageCodec,
  ImageFiles,
  ImageLimits,
  ImageRead,
  ImageSchemaUtils,
  ImageStruct,
  ReadSettings,
  RowMessages,
  UndecodableImageException
}
import org.apache.spark.broadcast.Broadcast
import org.apache.spark.util.SerializableConfiguration
import org.apache.spark.ml.mmlspark.SparkInternals
import org.apache.spark.ml.param.{Param, ParamMap}
import org.apache.spark.ml.util.Identifiable
import org.apache.spark.sql.{Column, DataFrame, Dataset, Row}
import org.apache.spark.sql.expressions.UserDefinedFunction
import org.apache.spark.sql.functions.{col, udf}
import org.apache.spark.sql.types.{
  ArrayType,
  BinaryType,
  DataType,
  FloatType,
  Metadata,
  MetadataBuilder,
  StructType
}
import org.opencv.core.{Core, CvType, Mat}

/** Applies a chain of OpenCV operations to each image, in the order given, in one pass per row with
  * no intermediate columns. The input is an image struct, or encoded image bytes (a binary column,
  * as the `binaryFile` source gives), decoded in the same pass (color, EXIF orientation applied)
  * and, with `reducedDecode`, at the smallest JPEG scale the first resize allows. The output is an
  * image struct or, with `toTensor`, a flat `array<float>` in CHW layout (channels in
  * `tensorChannelOrder`), its shape `[C, H, W]` recorded in the column metadata under `tensorShape`
  * (-1 where it depends on the input). A row whose image is null or fails an operation (a crop
  * outside the image, say) gets a null output and an error message; it is never dropped.
  */
final class ImageTransformer(override val uid: String)
    extends RowwiseTransformer
    with ImageTransformerDecls
    with StageWritable {

  def this() = this(Identifiable.randomUID("ImageTransformer"))

  /** Param for the operations, as JSON; its doc lists every op of the registry. */
  final val operations: Param[String] = new Param[String](
    this,
    "operations",
    ImageOp.paramDoc,
    (json: String) => { ImageOp.fromJson(json); true }
  )

  def getOperations: String = $(operations)

  def setOperations(value: String): this.type = set(operations, value)

  setDefault(
    inputCol -> "image",
    outputCol -> "transformed",
    errorCol -> "transformError",
    operations -> "[]",
    toTensor -> false,
    tensorChannelOrder -> "RGB",
    reducedDecode -> true
  )

  /** The operations, parsed. */
  def getOps: Seq[ImageOp] = ImageOp.fromJson($(operations))

  def addOp(op: ImageOp): this.type = {
    op.validate()
    setOperations(ImageOp.toJson(getOps :+ op))
  }

  def resize(height: Int, width: Int): this.type = addOp(Resize(height, width))

  /** Resizes the shorter side to `size`, keeping the aspect ratio if `keepAspectRatio`, otherwise
    * to `size` x `size`.
    */
  def resize(size: Int, keepAspectRatio: Boolean): this.type =
    addOp(if (keepAspectRatio) ResizeShorter(size) else Resize(size, size))

  def crop(x: Int, y: Int, height: Int, width: Int): this.type = addOp(Crop(x, y, height, width))

  /** Fits the image into a `size` x `size` square keeping its aspect ratio, padded with `padValue`
    * (114 by default, as YOLO detectors take it).
    */
  def letterbox(size: Int, padValue: Double = 114.0): this.type = addOp(Letterbox(size, padValue))

  def centerCrop(height: Int, width: Int): this.type = addOp(CenterCrop(height, width))

  def colorFormat(format: String): this.type = addOp(ColorFormat(format))

  def flip(flipCode: Int): this.type = addOp(Flip(flipCode))

  def blur(height: Int, width: Int): this.type = addOp(Blur(height, width))

  def threshold(threshold: Double, maxVal: Double, thresholdType: Int): this.type =
    addOp(Threshold(threshold, maxVal, thresholdType))

  def gaussianKernel(apertureSize: Int, sigma: Double): this.type = addOp(
    GaussianKernel(apertureSize, sigma)
  )

  /** Normalizes, and makes the output a tensor unless `toTensor` was set (as SynapseML does). */
  def normalize(mean: Array[Double], std: Array[Double], colorScaleFactor: Double): this.type = {
    addOp(Normalize(mean.toSeq, std.toSeq, colorScaleFactor))
    if (isSet(toTensor)) this else set(toTensor, true)
  }

  /** Converts with an OpenCV COLOR_* code from a BGR(A) image, as SynapseML takes it. */
  def colorFormat(code: Int): this.type = colorFormat(code.toString)

  /** Whether the tensor has one (gray) channel: the last color conversion is to GRAY. */
  private def grayTensor(ops: Seq[ImageOp]): Boolean =
    ops
      .collect { case c: ColorFormat => ColorFormat.targets.resolve(c.format) }
      .lastOption
      .flatten
      .contains("GRAY")

  /** `[C, H, W]` of the tensor output, -1 where it depends on the input. */
  def tensorShape: Array[Long] = {
    val ops = getOps
    val size = ops.foldLeft(Option.empty[(Int, Int)])((known, op) =>
      if (op.changesSize) op.fixedSize else known
    )
    val channels = if (grayTensor(ops)) 1L else 3L
    Array(channels, size.map(_._1.toLong).getOrElse(-1L), size.map(_._2.toLong).getOrElse(-1L))
  }

  private def tensorMetadata: Metadata =
    new MetadataBuilder()
      .putLongArray("tensorShape", tensorShape)
      .putString(
        "tensorChannelOrder",
        if (grayTensor(getOps)) "GRAY" else Choices.channelOrder($(tensorChannelOrder))
      )
      .build()

  override protected def inputKind: ColumnKind = ImageTransformer.InputColumn

  override protected def outputDataType: DataType =
    if ($(toTensor)) ArrayType(FloatType, containsNull = false) else ImageSchemaUtils.imageType

  override protected def outputMetadata: Metadata =
    if ($(toTensor)) tensorMetadata else Metadata.empty

  override protected def rowResults(dataset: Dataset[_], input: Column): Column = {
    val ops = getOps
    val tensorOrder = if (grayTensor(ops)) "GRAY" else Choices.channelOrder($(tensorChannelOrder))
    val encoded = dataset.schema($(inputCol)).dataType == BinaryType
    val target = if ($(reducedDecode)) ImageOps.reducedDecodeTarget(ops) else None
    val again = if (encoded) None else reread(dataset.schema)
    val transform = ($(toTensor), encoded) match {
      case (tensor, false) if again.isDefined =>
        val (settings, (height, width)) = again.get
        val conf = ImageFiles.hadoopConf(dataset.sparkSession)
        val scale = (1, height, width)
        if (tensor) {
          ImageTransformer.rereadUdf(
            conf,
            settings,
            scale,
            ops,
            (image: Image, _: String) => ImageTransformer.toCHW(image, tensorOrder)
          )
        } else ImageTransformer.rereadUdf(conf, settings, scale, ops, ImageTransformer.withOrigin)
      case (true, false) =>
        RowResults.udf1 { (row: Row) =>
          ImageTransformer.run(ops)(row, image => ImageTransformer.toCHW(image, tensorOrder))
        }
      case (false, false) =>
        RowResults.udf1 { (row: Row) =>
          ImageTransformer.run(ops)(
            row,
            image => ImageSchemaUtils.toStruct(image.mat, row.getString(0))
          )
        }
      case (true, true) =>
        RowResults.udf1 { (bytes: Array[Byte]) =>
          ImageTransformer.decodeAndRun(ops, target)(
            bytes,
            image => ImageTransformer.toCHW(image, tensorOrder)
          )
        }
      case (false, true) =>
        RowResults.udf1 { (bytes: Array[Byte]) =>
          ImageTransformer.decodeAndRun(ops, target)(
            bytes,
            image => ImageSchemaUtils.toStruct(image.mat, null)
          )
        }
    }
    transform(input)
  }

  /** The settings of `read_images` and the size to decode at, when this stage decodes the files of
    * its input again, smaller: with `reducedDecode`, on `read_images`' full-size image, when the
    * operations start with a resize.
    */
  private def reread(schema: StructType): Option[(ReadSettings, (Int, Int))] =
    if (! $(reducedDecode)) None
    else
      ReadSettings
        .of(schema($(inputCol)))
        .filter(_.fullSize)
        .flatMap(s => ImageOps.reducedDecodeTarget(getOps).map(s -> _))

  override def transform(dataset: Dataset[_]): DataFrame = {
    transformSchema(dataset.schema, logging = true)
    DeferredColumns.of(dataset) match {
      case Some(d @ Deferred(_, _, _, _, Some(read: ImageRead))) if $(inputCol) == "image" =>
        fromFiles(d, read, reread(dataset.schema).map(_._2))
      case _ => DeferredColumns.around(dataset, Seq($(inputCol)))(super.transform)
    }
  }

  /** This stage on `read_images`' own output, `d`: each task reads the file at `path` and decodes
    * it once, at `target` when given (as [[reread]] does) or as the read decodes it, straight into
    * the operations, with no image struct between. `error` is the read's error, from the same pass;
    * `image` stays deferred, computed only where read.
    */
  private def fromFiles(d: Deferred, read: ImageRead, target: Option[(Int, Int)]): DataFrame = {
    val ops = getOps
    val tensorOrder = if (grayTensor(ops)) "GRAY" else Choices.channelOrder($(tensorChannelOrder))
    val scale = read.settings.scaleFor(target)
    val fused = if ($(toTensor)) {
      ImageTransformer.fileUdf(
        read,
        scale,
        ops,
        (image: Image, _: String) => ImageTransformer.toCHW(image, tensorOrder)
      )
    } else {
      ImageTransformer.fileUdf(read, scale, ops, ImageTransformer.withOrigin)
    }
    val tmp = s"__result_$uid"
    val base = d.base
      .withColumn(tmp, fused(col("path"), col(read.listingErrorCol)))
      .withColumn("error", col(s"$tmp.readError"))
      .withColumn($(outputCol), col(s"$tmp.value").as($(outputCol), outputMetadata))
      .withColumn($(errorCol), col(s"$tmp.error"))
      .drop(tmp)
    read.deferredOver(d, base, Seq($(outputCol), $(errorCol)))
  }

  override def copy(extra: ParamMap): ImageTransformer = defaultCopy(extra)
}

/** One row of [[ImageTransformer]] on files: its output or (null) the reason in `error`, and the
  * read's error, where the file could not be read or decoded.
  */
final case class FileResult[T](value: T, error: String, readError: String)

object ImageTransformer extends StageReadable[ImageTransformer] {

  /** What the input column may hold: an image struct, or encoded image bytes. */
  val InputColumn: ColumnKind = ColumnKind(
    ImageSchemaUtils.ImageColumn.description + " or encoded image bytes (binary)",
    t => t == BinaryType || ImageSchemaUtils.ImageColumn.accepts(t)
  )

  /** Runs `ops` on the image in `row` and hands the result to `output`; every Mat made on the way
    * is released before this returns, whatever happens.
    */
  private[mmlspark] def run[T](ops: Seq[ImageOp])(row: Row, output: Image => T): T = {
    if (row == null) throw new IllegalArgumentException(NoImage)
    val first = ImageSchemaUtils.toMat(row)
    runOn(ops)(Image(first, ImageOps.orderOf(first)), output)
  }

  /** Decodes `bytes` (color, EXIF orientation applied; at the smallest JPEG scale that covers
    * `target` when there is one), then runs `ops` on the image like [[run]].
    */
  private[mmlspark] def decodeAndRun[T](ops: Seq[ImageOp], target: Option[(Int, Int)])(
      bytes: Array[Byte],
      output: Image => T
  ): T = {
    if (bytes == null) throw new IllegalArgumentException(NoImage)
    val (height, width) = target.getOrElse((0, 0))
    val first = ImageCodec.decode(bytes, "color", applyOrientation = true, 1, height, width)
    runOn(ops)(Image(first, ImageOps.orderOf(first)), output)
  }

  private[opencv] val NoImage = RowMessages.NoImage()

  /** The image as an image struct, its origin the path it was read from. */
  private[opencv] val withOrigin: (Image, String) => ImageStruct =
    (image, path) => ImageSchemaUtils.toStruct(image.mat, path)

  /** The UDF of [[ImageTransformer]] on files: (path, listing error) to a [[FileResult]] of
    * `output` (of the image and its path). `scale` is (reduceFactor, minHeight, minWidth) of the
    * decode.
    */
  private[mmlspark] def fileUdf[T: TypeTag](
      read: ImageRead,
      scale: (Int, Int, Int),
      ops: Seq[ImageOp],
      output: (Image, String) => T
  ): UserDefinedFunction = udf { (path: String, listingError: String) =>
    val decoded =
      try {
        if (listingError != null) throw new UndecodableImageException(listingError)
        Right(decodeFile(path, read.conf, read.settings, scale))
      } catch {
        case NonFatal(e) => Left(RowResults.describe(e))
        case e: OutOfMemoryError => Left(RowResults.describe(e))
      }
    decoded match {
      case Left(readError) => FileResult(null.asInstanceOf[T], NoImage, readError)
      case Right(first) =>
        val result = RowResults.attempt(runFile(ops, first, path, output))
        FileResult(result.value, result.error, null)
    }
  }.asNondeterministic()

  /** The UDF of [[ImageTransformer]] on `read_images`' images decoded again: each image's origin
    * read and decoded at `scale`, then `ops`, into a `RowResult` of `output`.
    */
  private[opencv] def rereadUdf[T: TypeTag](
      conf: Broadcast[SerializableConfiguration],
      settings: ReadSettings,
      scale: (Int, Int, Int),
      ops: Seq[ImageOp],
      output: (Image, String) => T
  ): UserDefinedFunction = RowResults.udf1 { (row: Row) =>
    if (row == null) throw new IllegalArgumentException(NoImage)
    val origin = row.getString(0)
    runFile(ops, decodeFile(origin, conf, settings, scale), origin, output)
  }

  /** `ops` on `first`, decoded from the file at `path`, which it owns. */
  private def runFile[T](
      ops: Seq[ImageOp],
      first: Mat,
      path: String,
      output: (Image, String) => T
  ): T =
    runOn(ops)(Image(first, ImageOps.orderOf(first)), image => output(image, path))

  /** The file at `path` decoded as `settings` say, at `scale` (reduceFactor, minHeight, minWidth),
    * into a new Mat the caller releases; what the read refuses (its size at the read's scale over
    * the pixel limit, say) is refused whatever the scale.
    */
  private[opencv] def decodeFile(
      path: String,
      conf: Broadcast[SerializableConfiguration],
      settings: ReadSettings,
      scale: (Int, Int, Int)
  ): Mat = {
    val bytes = ImageFiles.readBytes(path, conf.value, ImageLimits.maxFileBytes)
    val s = settings
    ImageCodec.prepare(
      bytes,
      s.colorMode,
      s.applyOrientation,
      s.reduceFactor,
      s.minHeight,
      s.minWidth
    )
    val (reduce, height, width) = scale
    ImageCodec.decode(bytes, s.colorMode, s.applyOrientation, reduce, height, width)
  }

  /** Runs `ops` on `image`, which it owns, and hands the result to `output`; every Mat is released
    * before this returns, whatever happens.
    */
  private[opencv] def runOn[T](ops: Seq[ImageOp])(image: Image, output: Image => T): T = {
    val limit = ImageLimits.maxPixels
    def refuse(op: ImageOp, height: Long, width: Long): Nothing =
      throw new IllegalArgumentException(
        RowMessages.OpOverLimit(
          "op" -> op.op,
          "width" -> width,
          "height" -> height,
          "pixels" -> height * width,
          "limit" -> limit,
          "key" -> ImageLimits.MaxPixelsKey
        )
      )
    var current = image
    try {
      ops.foreach { op =>
        op.fixedSize.foreach { case (h, w) => if (h.toLong * w > limit) refuse(op, h, w) }
        val next = op(current)
        current.mat.release()
        current = next
        if (current.mat.total() > limit) refuse(op, current.mat.rows(), current.mat.cols())
      }
      output(current)
    } finally current.mat.release()
  }

  /** The pixels as a flat CHW float array with channels in `order` ("RGB", "BGR" or "GRAY"): the
    * channels are split into planes natively and each plane is copied in with one memcpy.
    */
  private[mmlspark] def toCHW(image: Image, order: String): Array[Float] = {
    val (source, reversed) = (image.order, image.mat.channels(), order) match {
      case ("GRAY", 1, "GRAY") | ("BGR", 3, "BGR") | ("RGB", 3, "RGB") => (image, false)
      case ("BGR", 3, "RGB") | ("RGB", 3, "BGR") => (image, true)
      case _ => (ColorFormat(order)(image), false) // gray to color, alpha dropped, to gray
    }
    val planes = new java.util.ArrayList[Mat]()
    try {
      val asFloat =
        if (CvType.depth(source.mat.`type`()) == CvType.CV_32F) source.mat
        else {
          val converted = new Mat()
          source.mat.convertTo(converted, CvType.CV_32F)
          converted
        }
      try Core.split(asFloat, planes)
      finally if (asFloat ne source.mat) asFloat.release()
      val planeSize = source.mat.rows().toLong * source.mat.cols()
      val channels = planes.size()
      val chw = new Array[Float](Math.toIntExact(planeSize * channels))
      (0 until channels).foreach { c =>
        val plane = planes.get(if (reversed) channels - 1 - c else c)
        SparkInternals.copyMemory(
          null,
          plane.dataAddr(),
          chw,
          SparkInternals.FloatArrayOffset + c * planeSize * 4,
          planeSize * 4
        )
      }
      chw
    } finally {
      planes.forEach(_.release())
      if (source ne image) source.mat.release()
    }
  }

}
