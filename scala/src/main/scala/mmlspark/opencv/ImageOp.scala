package mmlspark.opencv

import mmlspark.contracts.Choices
import org.apache.spark.ml.mmlspark.SparkInternals
import org.json4s._
import org.json4s.jackson.JsonMethods.{compact, parse, render}
import org.opencv.core.{Core, CvType, Mat, Rect, Scalar, Size}
import org.opencv.imgproc.Imgproc

/** An image between operations: the pixels and the order of their channels ("BGR", "RGB" or "GRAY";
  * a fourth channel, if any, is alpha).
  */
final case class Image(mat: Mat, order: String)

/** One operation of an [[ImageTransformer]]. `apply` returns a new Mat and leaves the input to the
  * caller, who releases it; a failure is an exception that fails only its row.
  */
sealed trait ImageOp {

  /** The description of this operation in [[ImageOp.registry]]. */
  def spec: OpSpec[_ <: ImageOp] = ImageOp.specOf(getClass)

  /** The name this operation has in the JSON form and the fluent API. */
  def op: String = spec.name

  /** The fields of the JSON form, besides `op`. */
  def fields: List[JField] = spec.encode(this)

  /** Fails for arguments that can never work (called when the param is set): the first of the
    * registry's rules ([[OpSpec.rules]]) they break.
    */
  final def validate(): Unit = spec.validate(this)

  def apply(image: Image): Image

  /** The output size when it does not depend on the input: (height, width). */
  def fixedSize: Option[(Int, Int)] = None

  /** Whether the output size depends on the input (after this op, earlier fixed sizes no longer
    * hold).
    */
  def changesSize: Boolean = false

  /** For an operation that scales any input to a size of its own (a resize): the size (height,
    * width) its input must at least have, so that a smaller decode still serves it.
    */
  def minInputSize: Option[(Int, Int)] = None

  /** Whether the operation works pixel by pixel, so that it may run before a resize on a smaller
    * decode and mean the same.
    */
  def pixelwise: Boolean = false

  protected def require(condition: Boolean, message: => String): Unit =
    if (!condition) throw new IllegalArgumentException(s"$op: $message")

  protected def newMat(image: Image)(f: (Mat, Mat) => Unit): Image = {
    val out = new Mat()
    f(image.mat, out)
    Image(out, image.order)
  }
}

/** An operation whose output has a size of its own, (height, width), whatever its input's. */
sealed trait FixedSizeOp extends ImageOp {
  protected def outputSize: (Int, Int)
  override def fixedSize: Option[(Int, Int)] = Some(outputSize)
  override def changesSize: Boolean = true
}

/** A [[FixedSizeOp]] that scales any input to its size, which is then the least input size of a
  * smaller decode.
  */
sealed trait ScalesToSize extends FixedSizeOp {
  override def minInputSize: Option[(Int, Int)] = Some(outputSize)
}

/** Resizes to `height` x `width`. */
final case class Resize(height: Int, width: Int, interpolation: Int = Imgproc.INTER_LINEAR)
    extends ScalesToSize {
  def apply(image: Image): Image =
    newMat(image)((in, out) =>
      Imgproc.resize(in, out, new Size(width, height), 0, 0, interpolation)
    )
  protected def outputSize: (Int, Int) = (height, width)
}

object Resize
    extends OpSpec[Resize](
      "resize",
      "Resizes to ``height`` x ``width``.",
      Seq(
        Arg("height", "the height of the output, in pixels"),
        Arg("width", "the width of the output, in pixels"),
        Arg.interpolation
      )
    ) {
  def example: Resize = Resize(20, 30, Imgproc.INTER_AREA)
  protected def ownRules: Seq[OpRule] = Seq(OpRule.positiveSize)
}

/** Resizes so that the shorter side is `size`, keeping the aspect ratio; the longer side is
  * `longer * size / shorter` rounded half up.
  */
final case class ResizeShorter(size: Int, interpolation: Int = Imgproc.INTER_LINEAR)
    extends ImageOp {
  def apply(image: Image): Image = {
    val (h, w) = (image.mat.rows(), image.mat.cols())
    val scale = size.toDouble / math.min(h, w)
    val (nh, nw) =
      if (h <= w) (size, math.round(w * scale).toInt) else (math.round(h * scale).toInt, size)
    newMat(image)((in, out) => Imgproc.resize(in, out, new Size(nw, nh), 0, 0, interpolation))
  }
  override def changesSize: Boolean = true
  override def minInputSize: Option[(Int, Int)] = Some((size, size))
}

object ResizeShorter
    extends OpSpec[ResizeShorter](
      "resizeShorter",
      "Resizes so that the shorter side is ``size``, keeping the aspect ratio.",
      Seq(
        Arg("size", "the length of the shorter side of the output, in pixels"),
        Arg.interpolation
      ),
      fluent = false // through resize(size=..., keepAspectRatio=True)
    ) {
  def example: ResizeShorter = ResizeShorter(16, Imgproc.INTER_NEAREST)
  protected def ownRules: Seq[OpRule] =
    Seq(OpRule.positive("size")("size must be positive but was {size}"))
}

/** How [[Letterbox]] fits a `height` x `width` image into a `size` x `size` square: the image is
  * scaled by min(size / height, size / width) to `scaledHeight` x `scaledWidth` (rounded half to
  * even) and padded by `top` rows above and `left` columns to the left (half the padding, rounded
  * down; the rest goes below and to the right).
  */
final case class LetterboxGeometry(
    height: Int,
    width: Int,
    size: Int,
    scaledHeight: Int,
    scaledWidth: Int,
    top: Int,
    left: Int
) {

  /** A point of the square (x, y) in the image's pixel coordinates, clipped to the image. */
  def toImageX(x: Double): Double =
    math.min(math.max((x - left) * width / scaledWidth, 0.0), width.toDouble)
  def toImageY(y: Double): Double =
    math.min(math.max((y - top) * height / scaledHeight, 0.0), height.toDouble)
}

object LetterboxGeometry {
  def apply(height: Int, width: Int, size: Int): LetterboxGeometry = {
    require(
      height > 0 && width > 0,
      OpMessages.EmptyLetterbox("width" -> width, "height" -> height)
    )
    val scale = math.min(size.toDouble / height, size.toDouble / width)
    val scaledHeight = math.max(1, math.rint(height * scale).toInt)
    val scaledWidth = math.max(1, math.rint(width * scale).toInt)
    LetterboxGeometry(
      height,
      width,
      size,
      scaledHeight,
      scaledWidth,
      (size - scaledHeight) / 2,
      (size - scaledWidth) / 2
    )
  }
}

/** Scales the image to fit a `size` x `size` square, keeping its aspect ratio (bilinear), and pads
  * the rest evenly with `padValue` in every channel: the letterbox YOLO detectors take.
  */
final case class Letterbox(size: Int, padValue: Double = 114.0) extends ScalesToSize {
  def apply(image: Image): Image = {
    val g = LetterboxGeometry(image.mat.rows(), image.mat.cols(), size)
    val scaled =
      if (g.scaledHeight == g.height && g.scaledWidth == g.width) image.mat
      else {
        val out = new Mat()
        Imgproc.resize(
          image.mat,
          out,
          new Size(g.scaledWidth, g.scaledHeight),
          0,
          0,
          Imgproc.INTER_LINEAR
        )
        out
      }
    try
      newMat(image.copy(mat = scaled))((in, out) =>
        Core.copyMakeBorder(
          in,
          out,
          g.top,
          size - g.scaledHeight - g.top,
          g.left,
          size - g.scaledWidth - g.left,
          Core.BORDER_CONSTANT,
          new Scalar(padValue, padValue, padValue, padValue)
        )
      )
    finally if (scaled ne image.mat) scaled.release()
  }
  protected def outputSize: (Int, Int) = (size, size)
}

object Letterbox
    extends OpSpec[Letterbox](
      "letterbox",
      "Scales to fit a ``size`` x ``size`` square keeping the aspect ratio, and pads the rest " +
        "evenly with ``padValue`` (YOLO's letterbox).",
      Seq(
        Arg("size", "the height and width of the output, in pixels"),
        Arg("padValue", "the value of the padding, in every channel")
      )
    ) {
  def example: Letterbox = Letterbox(32, 0.0)
  protected def ownRules: Seq[OpRule] =
    Seq(OpRule.positive("size")("size must be positive but was {size}"))
}

/** Keeps the `height` x `width` region whose top-left corner is (`x`, `y`). */
final case class Crop(x: Int, y: Int, height: Int, width: Int) extends FixedSizeOp {
  def apply(image: Image): Image = {
    val (h, w) = (image.mat.rows(), image.mat.cols())
    require(
      x + width <= w && y + height <= h,
      OpMessages.Outside(
        "x" -> x,
        "y" -> y,
        "height" -> height,
        "width" -> width,
        "imageHeight" -> h,
        "imageWidth" -> w
      )
    )
    val region = image.mat.submat(new Rect(x, y, width, height))
    try Image(region.clone(), image.order)
    finally region.release()
  }
  protected def outputSize: (Int, Int) = (height, width)
}

object Crop
    extends OpSpec[Crop](
      "crop",
      "Keeps the ``height`` x ``width`` region whose top-left corner is (``x``, ``y``).",
      Seq(
        Arg("x", "the column of the region's left edge"),
        Arg("y", "the row of the region's top edge"),
        Arg("height", "the height of the region"),
        Arg("width", "the width of the region")
      )
    ) {
  def example: Crop = Crop(1, 2, 10, 11)
  protected def ownRules: Seq[OpRule] = Seq(
    OpRule.atLeastZero("x", "y")("x and y must be at least 0 but were ({x}, {y})"),
    OpRule.positiveSize
  )
}

/** Keeps the central `height` x `width` region (offsets rounded down, as `(H - h) // 2`). */
final case class CenterCrop(height: Int, width: Int) extends FixedSizeOp {
  def apply(image: Image): Image = {
    val (h, w) = (image.mat.rows(), image.mat.cols())
    require(
      height <= h && width <= w,
      OpMessages.Larger("height" -> height, "width" -> width, "imageHeight" -> h, "imageWidth" -> w)
    )
    Crop((w - width) / 2, (h - height) / 2, height, width).apply(image)
  }
  protected def outputSize: (Int, Int) = (height, width)
}

object CenterCrop
    extends OpSpec[CenterCrop](
      "centerCrop",
      "Keeps the central ``height`` x ``width`` region.",
      Seq(Arg("height", "the height of the region"), Arg("width", "the width of the region"))
    ) {
  def example: CenterCrop = CenterCrop(8, 9)
  protected def ownRules: Seq[OpRule] = Seq(OpRule.positiveSize)
}

/** Converts the channels to `format`: "RGB", "BGR" or "GRAY" (alpha is dropped). */
final case class ColorFormat(format: String) extends ImageOp {

  /** The channel order to convert to: `format` in our spelling. */
  lazy val target: String = ColorFormat.targets(format)

  def apply(image: Image): Image = {
    val channels = image.mat.channels()
    val code: Option[Int] = (image.order, channels, target) match {
      case (from, 3, to) if from == to => None
      case ("GRAY", 1, "GRAY") => None
      case ("BGR", 3, "RGB") | ("RGB", 3, "BGR") => Some(Imgproc.COLOR_BGR2RGB)
      case ("BGR", 3, "GRAY") => Some(Imgproc.COLOR_BGR2GRAY)
      case ("RGB", 3, "GRAY") => Some(Imgproc.COLOR_RGB2GRAY)
      case ("BGR", 4, "BGR") | ("RGB", 4, "RGB") => Some(Imgproc.COLOR_BGRA2BGR)
      case ("BGR", 4, "RGB") | ("RGB", 4, "BGR") => Some(Imgproc.COLOR_BGRA2RGB)
      case ("BGR", 4, "GRAY") => Some(Imgproc.COLOR_BGRA2GRAY)
      case ("RGB", 4, "GRAY") => Some(Imgproc.COLOR_RGBA2GRAY)
      case ("GRAY", 1, "BGR") => Some(Imgproc.COLOR_GRAY2BGR)
      case ("GRAY", 1, "RGB") => Some(Imgproc.COLOR_GRAY2RGB)
      case (from, n, to) =>
        throw new IllegalArgumentException(
          s"$op: " + OpMessages.CannotConvert("channels" -> n, "from" -> from, "to" -> to)
        )
    }
    code match {
      case None => Image(image.mat.clone(), target)
      case Some(c) => Image(newMat(image)((in, out) => Imgproc.cvtColor(in, out, c)).mat, target)
    }
  }
  override def pixelwise: Boolean = true
}

object ColorFormat
    extends OpSpec[ColorFormat](
      "colorFormat",
      "Converts the channels to ``\"RGB\"``, ``\"BGR\"`` or ``\"GRAY\"`` (alpha is dropped).",
      Seq(
        Arg(
          "format",
          "the channel order of the output: RGB, BGR or GRAY (any case), or the OpenCV " +
            "COLOR_* conversion code from a BGR(A) image that gives it (e.g. 6, COLOR_BGR2GRAY)"
        )
      )
    ) {

  /** The output channel orders, with the OpenCV conversion codes (written as numbers) from a
    * decoded BGR or BGRA image that give each.
    */
  val targets: Choices = {
    import Imgproc._
    val codes = Seq(
      COLOR_BGR2RGB -> "RGB",
      COLOR_BGRA2RGB -> "RGB",
      COLOR_BGR2GRAY -> "GRAY",
      COLOR_BGRA2GRAY -> "GRAY",
      COLOR_BGRA2BGR -> "BGR",
      COLOR_GRAY2BGR -> "BGR"
    )
    Choices(Seq("RGB", "BGR", "GRAY"), codes.map { case (c, f) => c.toString -> f }.toMap)
  }
  def example: ColorFormat = ColorFormat("GRAY")
  protected def ownRules: Seq[OpRule] = Seq(
    OpRule.spelling("format", targets)(
      s"format must be one of ${targets.describe} but was '{format}'"
    )
  )
}

/** Flips around the x axis (0), the y axis (1, left-right) or both (-1). */
final case class Flip(flipCode: Int = 1) extends ImageOp {
  def apply(image: Image): Image = newMat(image)((in, out) => Core.flip(in, out, flipCode))
  override def pixelwise: Boolean = true
}

object Flip
    extends OpSpec[Flip](
      "flip",
      "Flips around the x axis (0), the y axis (1, left-right) or both (-1).",
      Seq(Arg("flipCode", "0 (up-down), 1 (left-right) or -1 (both)"))
    ) {
  def example: Flip = Flip(-1)
  protected def ownRules: Seq[OpRule] = Seq(
    OpRule(
      RuleKind.OneOf,
      Seq("flipCode"),
      "flipCode must be -1, 0 or 1 but was {flipCode}",
      Seq("-1", "0", "1")
    )
  )
}

/** Box blur with a `height` x `width` kernel. */
final case class Blur(height: Int, width: Int) extends ImageOp {
  def apply(image: Image): Image =
    newMat(image)((in, out) => Imgproc.blur(in, out, new Size(width, height)))
}

object Blur
    extends OpSpec[Blur](
      "blur",
      "Box blur with a ``height`` x ``width`` kernel.",
      Seq(Arg("height", "the height of the kernel"), Arg("width", "the width of the kernel"))
    ) {
  def example: Blur = Blur(3, 5)
  protected def ownRules: Seq[OpRule] = Seq(OpRule.positiveSize)
}

/** OpenCV's `threshold` with an OpenCV THRESH_* type (0 binary, 1 binary inverted, 2 truncate, 3 to
  * zero, 4 to zero inverted).
  */
final case class Threshold(threshold: Double, maxVal: Double, thresholdType: Int) extends ImageOp {
  def apply(image: Image): Image =
    newMat(image)((in, out) => Imgproc.threshold(in, out, threshold, maxVal, thresholdType))
  override def pixelwise: Boolean = true
}

object Threshold
    extends OpSpec[Threshold](
      "threshold",
      "OpenCV ``threshold`` with a THRESH_* type (0 binary ... 4 to-zero inverted).",
      Seq(
        Arg("threshold", "the threshold"),
        Arg("maxVal", "the value of the pixels over the threshold (binary types)"),
        Arg("thresholdType", "the OpenCV THRESH_* type", Some(Constants.threshold))
      )
    ) {
  def example: Threshold = Threshold(100.0, 200.5, Imgproc.THRESH_TRUNC)
  protected def ownRules: Seq[OpRule] = Nil
}

/** Gaussian blur with an `apertureSize` x `apertureSize` kernel (odd) and standard deviation
  * `sigma`.
  */
final case class GaussianKernel(apertureSize: Int, sigma: Double) extends ImageOp {
  def apply(image: Image): Image =
    newMat(image)((in, out) =>
      Imgproc.GaussianBlur(in, out, new Size(apertureSize, apertureSize), sigma)
    )
}

object GaussianKernel
    extends OpSpec[GaussianKernel](
      "gaussianKernel",
      "Gaussian blur with an odd ``apertureSize`` and standard deviation ``sigma``.",
      Seq(
        Arg("apertureSize", "the height and width of the kernel (odd)"),
        Arg("sigma", "the standard deviation of the Gaussian")
      )
    ) {
  def example: GaussianKernel = GaussianKernel(5, 1.5)
  protected def ownRules: Seq[OpRule] = Seq(
    OpRule(
      RuleKind.OddPositive,
      Seq("apertureSize"),
      "apertureSize must be odd and positive but was {apertureSize}"
    ),
    OpRule.atLeastZero("sigma")("sigma must be at least 0 but was {sigma}")
  )
}

/** `(pixel * colorScaleFactor - mean[c]) / std[c]` in 32-bit float, per channel. `mean` and `std`
  * list the channels in RGB order (one value applies to every channel), whatever order the image's
  * channels are in; alpha is left as is.
  */
final case class Normalize(
    mean: Seq[Double],
    std: Seq[Double],
    colorScaleFactor: Double = 1.0
) extends ImageOp {
  def apply(image: Image): Image = {
    val channels = image.mat.channels()
    val colorChannels = if (channels == 4) 3 else channels
    require(
      mean.length == 1 || mean.length == colorChannels,
      OpMessages.MeansCount("means" -> mean.length, "channels" -> colorChannels)
    )
    def perChannel(values: Seq[Double]): Array[Float] = {
      val full = if (values.length == 1) Seq.fill(colorChannels)(values.head) else values
      val ordered = if (image.order == "BGR") full.reverse else full
      (ordered ++ (if (channels == 4) Seq(0.0) else Nil)).map(_.toFloat).toArray
    }
    val (m, s) =
      (perChannel(mean), if (channels == 4) perChannel(std).updated(3, 1.0f) else perChannel(std))
    val pixels = ImageOps.floats(image.mat)
    val scale = colorScaleFactor.toFloat
    // One strided pass per channel: the same float operations, in the same order, as
    // numpy's (x * scale - mean) / std on float32.
    var c = 0
    while (c < colorChannels) {
      val (mc, sc) = (m(c), s(c))
      var i = c
      while (i < pixels.length) {
        pixels(i) = (pixels(i) * scale - mc) / sc
        i += channels
      }
      c += 1
    }
    val out = new Mat(image.mat.rows(), image.mat.cols(), CvType.CV_32FC(channels))
    SparkInternals.copyMemory(
      pixels,
      SparkInternals.FloatArrayOffset,
      null,
      out.dataAddr(),
      pixels.length * 4L
    )
    Image(out, image.order)
  }
  override def pixelwise: Boolean = true
}

object Normalize
    extends OpSpec[Normalize](
      "normalize",
      "``(pixel * colorScaleFactor - mean[c]) / std[c]`` in float32; ``mean`` and ``std`` list " +
        "the channels in RGB order (one value applies to all channels).",
      Seq(
        Arg("mean", "the means to subtract, per channel in RGB order (or one for all)"),
        Arg(
          "std",
          "the standard deviations to divide by, per channel in RGB order (or one for all)"
        ),
        Arg("colorScaleFactor", "the factor the pixels are multiplied by first")
      )
    ) {
  def example: Normalize = Normalize(Seq(0.5, 0.25, 0.125), Seq(2.0, 4.0, 8.0), 1.0 / 255)
  protected def ownRules: Seq[OpRule] = Seq(
    OpRule(
      RuleKind.SameNonEmptyLength,
      Seq("mean", "std"),
      "mean and std must have the same, non-zero length but had {mean.length} and {std.length}"
    ),
    OpRule(RuleKind.NoZero, Seq("std"), "std must not contain 0")
  )
}

object ImageOp {

  /** Every image operation, in the order the docs list them. Adding an operation: its case class,
    * its companion [[OpSpec]], and its entry here.
    */
  val registry: Seq[OpSpec[_ <: ImageOp]] = Seq(
    Resize,
    ResizeShorter,
    Crop,
    CenterCrop,
    ColorFormat,
    Flip,
    Blur,
    Threshold,
    GaussianKernel,
    Normalize,
    Letterbox
  )

  private lazy val byName: Map[String, OpSpec[_ <: ImageOp]] = registry.map(s => s.name -> s).toMap

  private lazy val byClass: Map[Class[_], OpSpec[_ <: ImageOp]] =
    registry.map(s => s.cls -> s).toMap

  def names: Seq[String] = registry.map(_.name)

  def spec(name: String): Option[OpSpec[_ <: ImageOp]] = byName.get(name)

  def specOf(cls: Class[_]): OpSpec[_ <: ImageOp] =
    byClass.getOrElse(cls, throw new IllegalStateException(s"${cls.getName} is not registered"))

  /** The doc of the `operations` param. */
  def paramDoc: String =
    "the operations as a JSON array of objects, each with 'op' and its arguments, applied in order " +
      s"(one of ${registry.map(_.signature).mkString(", ")}; set through the fluent methods of " +
      "the same names; [] applies none)"

  def toJson(ops: Seq[ImageOp]): String =
    compact(render(JArray(ops.map(o => JObject(("op" -> JString(o.op)) :: o.fields)).toList)))

  /** Parses and validates the JSON form; fails with a message naming the bad operation. */
  def fromJson(json: String): Seq[ImageOp] = {
    implicit val formats: Formats = DefaultFormats
    val parsed = parse(json) match {
      case JArray(items) => items
      case other =>
        throw new IllegalArgumentException(s"image operations must be a JSON array but were $json")
    }
    parsed.map { item =>
      val op = (item \ "op")
        .extractOpt[String]
        .getOrElse(
          throw new IllegalArgumentException(
            s"image operation without 'op': ${compact(render(item))}"
          )
        )
      val spec = byName.getOrElse(
        op,
        throw new IllegalArgumentException(
          s"unknown image operation '$op'; known: ${names.mkString(", ")}"
        )
      )
      val result: ImageOp =
        try spec.decode(item)
        catch {
          case e: MappingException =>
            throw new IllegalArgumentException(
              s"image operation ${compact(render(item))}: ${e.getMessage}"
            )
        }
      result.validate()
      result
    }
  }
}

/** Pixel access helpers shared by the operations and the tensor output. */
object ImageOps {

  /** The size (height, width) a decode must at least have to serve `ops`: the minimum input of
    * their first resize, when only pixel-wise operations come before it; None when the operations
    * need the image at full size.
    */
  def reducedDecodeTarget(ops: Seq[ImageOp]): Option[(Int, Int)] =
    ops.dropWhile(_.pixelwise).headOption.flatMap(_.minInputSize)

  /** The samples of `mat` (any depth) as floats, row-major with interleaved channels. */
  def floats(mat: Mat): Array[Float] = {
    val asFloat =
      if (CvType.depth(mat.`type`()) == CvType.CV_32F && mat.isContinuous) mat
      else {
        val out = new Mat()
        mat.convertTo(out, CvType.CV_32F)
        out
      }
    try mmlspark.pixels.ImageSchemaUtils.rawFloats(asFloat)
    finally if (asFloat ne mat) asFloat.release()
  }

  /** The channel order an image struct's pixels are in, from its channel count. */
  def orderOf(mat: Mat): String = if (mat.channels() == 1) "GRAY" else "BGR"
}
