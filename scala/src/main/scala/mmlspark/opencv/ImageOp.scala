package mmlspark.opencv

import org.json4s._
import org.json4s.jackson.JsonMethods.{compact, parse, render}
import org.apache.spark.unsafe.Platform
import org.opencv.core.{Core, CvType, Mat, Rect, Size}
import org.opencv.imgproc.Imgproc

/** An image between operations: the pixels and the order of their channels ("BGR", "RGB" or "GRAY";
  * a fourth channel, if any, is alpha).
  */
final case class Image(mat: Mat, order: String)

/** One operation of an [[ImageTransformer]]. `apply` returns a new Mat and leaves the input to the
  * caller, who releases it; a failure is an exception that fails only its row.
  */
sealed trait ImageOp {

  /** The name this operation has in the JSON form and the fluent API. */
  def op: String

  /** The fields of the JSON form, besides `op`. */
  def fields: List[JField]

  /** Fails for arguments that can never work (called when the param is set). */
  def validate(): Unit

  def apply(image: Image): Image

  /** The output size when it does not depend on the input: (height, width). */
  def fixedSize: Option[(Int, Int)] = None

  /** Whether the output size depends on the input (after this op, earlier fixed sizes no longer
    * hold).
    */
  def changesSize: Boolean = false

  protected def require(condition: Boolean, message: => String): Unit =
    if (!condition) throw new IllegalArgumentException(s"$op: $message")

  protected def newMat(image: Image)(f: (Mat, Mat) => Unit): Image = {
    val out = new Mat()
    f(image.mat, out)
    Image(out, image.order)
  }
}

/** Resizes to `height` x `width`. */
final case class Resize(height: Int, width: Int, interpolation: Int = Imgproc.INTER_LINEAR)
    extends ImageOp {
  val op = "resize"
  def fields: List[JField] =
    List("height" -> JInt(height), "width" -> JInt(width), "interpolation" -> JInt(interpolation))
  def validate(): Unit = {
    require(height > 0 && width > 0, s"height and width must be positive but were $height x $width")
    require(
      interpolation >= 0 && interpolation <= 4,
      s"interpolation must be an OpenCV INTER_* code 0-4 but was $interpolation"
    )
  }
  def apply(image: Image): Image =
    newMat(image)((in, out) =>
      Imgproc.resize(in, out, new Size(width, height), 0, 0, interpolation)
    )
  override def fixedSize: Option[(Int, Int)] = Some((height, width))
  override def changesSize: Boolean = true
}

/** Resizes so that the shorter side is `size`, keeping the aspect ratio; the longer side is
  * `longer * size / shorter` rounded half up.
  */
final case class ResizeShorter(size: Int, interpolation: Int = Imgproc.INTER_LINEAR)
    extends ImageOp {
  val op = "resizeShorter"
  def fields: List[JField] = List("size" -> JInt(size), "interpolation" -> JInt(interpolation))
  def validate(): Unit = {
    require(size > 0, s"size must be positive but was $size")
    require(
      interpolation >= 0 && interpolation <= 4,
      s"interpolation must be an OpenCV INTER_* code 0-4 but was $interpolation"
    )
  }
  def apply(image: Image): Image = {
    val (h, w) = (image.mat.rows(), image.mat.cols())
    val scale = size.toDouble / math.min(h, w)
    val (nh, nw) =
      if (h <= w) (size, math.round(w * scale).toInt) else (math.round(h * scale).toInt, size)
    newMat(image)((in, out) => Imgproc.resize(in, out, new Size(nw, nh), 0, 0, interpolation))
  }
  override def changesSize: Boolean = true
}

/** Keeps the `height` x `width` region whose top-left corner is (`x`, `y`). */
final case class Crop(x: Int, y: Int, height: Int, width: Int) extends ImageOp {
  val op = "crop"
  def fields: List[JField] =
    List("x" -> JInt(x), "y" -> JInt(y), "height" -> JInt(height), "width" -> JInt(width))
  def validate(): Unit = {
    require(x >= 0 && y >= 0, s"x and y must be at least 0 but were ($x, $y)")
    require(height > 0 && width > 0, s"height and width must be positive but were $height x $width")
  }
  def apply(image: Image): Image = {
    val (h, w) = (image.mat.rows(), image.mat.cols())
    require(
      x + width <= w && y + height <= h,
      s"region x=$x y=$y ${height}x$width lies outside the ${h}x$w image"
    )
    val region = image.mat.submat(new Rect(x, y, width, height))
    try Image(region.clone(), image.order)
    finally region.release()
  }
  override def fixedSize: Option[(Int, Int)] = Some((height, width))
  override def changesSize: Boolean = true
}

/** Keeps the central `height` x `width` region (offsets rounded down, as `(H - h) // 2`). */
final case class CenterCrop(height: Int, width: Int) extends ImageOp {
  val op = "centerCrop"
  def fields: List[JField] = List("height" -> JInt(height), "width" -> JInt(width))
  def validate(): Unit =
    require(height > 0 && width > 0, s"height and width must be positive but were $height x $width")
  def apply(image: Image): Image = {
    val (h, w) = (image.mat.rows(), image.mat.cols())
    require(height <= h && width <= w, s"${height}x$width is larger than the ${h}x$w image")
    Crop((w - width) / 2, (h - height) / 2, height, width).apply(image)
  }
  override def fixedSize: Option[(Int, Int)] = Some((height, width))
  override def changesSize: Boolean = true
}

/** Converts the channels to `format`: "RGB", "BGR" or "GRAY" (alpha is dropped). */
final case class ColorFormat(format: String) extends ImageOp {
  val op = "colorFormat"
  def fields: List[JField] = List("format" -> JString(format))
  def validate(): Unit = require(
    ColorFormat.formats.contains(format),
    s"format must be one of ${ColorFormat.formats.mkString(", ")} but was '$format'"
  )
  def apply(image: Image): Image = {
    val channels = image.mat.channels()
    val code: Option[Int] = (image.order, channels, format) match {
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
        throw new IllegalArgumentException(s"$op: cannot convert a $n-channel $from image to $to")
    }
    code match {
      case None => Image(image.mat.clone(), format)
      case Some(c) => Image(newMat(image)((in, out) => Imgproc.cvtColor(in, out, c)).mat, format)
    }
  }
}

object ColorFormat {
  val formats: Seq[String] = Seq("RGB", "BGR", "GRAY")
}

/** Flips around the x axis (0), the y axis (1, left-right) or both (-1). */
final case class Flip(flipCode: Int) extends ImageOp {
  val op = "flip"
  def fields: List[JField] = List("flipCode" -> JInt(flipCode))
  def validate(): Unit =
    require(Seq(-1, 0, 1).contains(flipCode), s"flipCode must be -1, 0 or 1 but was $flipCode")
  def apply(image: Image): Image = newMat(image)((in, out) => Core.flip(in, out, flipCode))
}

/** Box blur with a `height` x `width` kernel. */
final case class Blur(height: Int, width: Int) extends ImageOp {
  val op = "blur"
  def fields: List[JField] = List("height" -> JInt(height), "width" -> JInt(width))
  def validate(): Unit =
    require(height > 0 && width > 0, s"height and width must be positive but were $height x $width")
  def apply(image: Image): Image =
    newMat(image)((in, out) => Imgproc.blur(in, out, new Size(width, height)))
}

/** OpenCV's `threshold` with an OpenCV THRESH_* type (0 binary, 1 binary inverted, 2 truncate, 3 to
  * zero, 4 to zero inverted).
  */
final case class Threshold(threshold: Double, maxVal: Double, thresholdType: Int) extends ImageOp {
  val op = "threshold"
  def fields: List[JField] = List(
    "threshold" -> JDouble(threshold),
    "maxVal" -> JDouble(maxVal),
    "thresholdType" -> JInt(thresholdType)
  )
  def validate(): Unit = require(
    thresholdType >= 0 && thresholdType <= 4,
    s"thresholdType must be 0-4 but was $thresholdType"
  )
  def apply(image: Image): Image =
    newMat(image)((in, out) => Imgproc.threshold(in, out, threshold, maxVal, thresholdType))
}

/** Gaussian blur with an `apertureSize` x `apertureSize` kernel (odd) and standard deviation
  * `sigma`.
  */
final case class GaussianKernel(apertureSize: Int, sigma: Double) extends ImageOp {
  val op = "gaussianKernel"
  def fields: List[JField] = List("apertureSize" -> JInt(apertureSize), "sigma" -> JDouble(sigma))
  def validate(): Unit = {
    require(
      apertureSize > 0 && apertureSize % 2 == 1,
      s"apertureSize must be odd and positive but was $apertureSize"
    )
    require(sigma >= 0, s"sigma must be at least 0 but was $sigma")
  }
  def apply(image: Image): Image =
    newMat(image)((in, out) =>
      Imgproc.GaussianBlur(in, out, new Size(apertureSize, apertureSize), sigma)
    )
}

/** `(pixel * colorScaleFactor - mean[c]) / std[c]` in 32-bit float, per channel. `mean` and `std`
  * list the channels in RGB order (one value applies to every channel), whatever order the image's
  * channels are in; alpha is left as is.
  */
final case class Normalize(mean: Seq[Double], std: Seq[Double], colorScaleFactor: Double)
    extends ImageOp {
  val op = "normalize"
  def fields: List[JField] = List(
    "mean" -> JArray(mean.map(JDouble(_)).toList),
    "std" -> JArray(std.map(JDouble(_)).toList),
    "colorScaleFactor" -> JDouble(colorScaleFactor)
  )
  def validate(): Unit = {
    require(
      mean.nonEmpty && mean.length == std.length,
      s"mean and std must have the same, non-zero length but had ${mean.length} and ${std.length}"
    )
    require(std.forall(_ != 0.0), "std must not contain 0")
  }
  def apply(image: Image): Image = {
    val channels = image.mat.channels()
    val colorChannels = if (channels == 4) 3 else channels
    require(
      mean.length == 1 || mean.length == colorChannels,
      s"${mean.length} means for a $colorChannels-channel image"
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
    Platform.copyMemory(
      pixels,
      Platform.FLOAT_ARRAY_OFFSET,
      null,
      out.dataAddr(),
      pixels.length * 4L
    )
    Image(out, image.order)
  }
}

object ImageOp {

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
      def int(name: String): Int = (item \ name).extract[Int]
      def intOr(name: String, default: Int): Int = (item \ name).extractOpt[Int].getOrElse(default)
      def double(name: String): Double = (item \ name).extract[Double]
      def doubles(name: String): Seq[Double] = (item \ name).extract[List[Double]]
      val op = (item \ "op")
        .extractOpt[String]
        .getOrElse(
          throw new IllegalArgumentException(
            s"image operation without 'op': ${compact(render(item))}"
          )
        )
      val result: ImageOp =
        try {
          op match {
            case "resize" =>
              Resize(int("height"), int("width"), intOr("interpolation", Imgproc.INTER_LINEAR))
            case "resizeShorter" =>
              ResizeShorter(int("size"), intOr("interpolation", Imgproc.INTER_LINEAR))
            case "crop" => Crop(int("x"), int("y"), int("height"), int("width"))
            case "centerCrop" => CenterCrop(int("height"), int("width"))
            case "colorFormat" => ColorFormat((item \ "format").extract[String])
            case "flip" => Flip(int("flipCode"))
            case "blur" => Blur(int("height"), int("width"))
            case "threshold" =>
              Threshold(double("threshold"), double("maxVal"), int("thresholdType"))
            case "gaussianKernel" => GaussianKernel(int("apertureSize"), double("sigma"))
            case "normalize" =>
              Normalize(doubles("mean"), doubles("std"), double("colorScaleFactor"))
            case other =>
              throw new IllegalArgumentException(
                s"unknown image operation '$other'; known: resize, resizeShorter, crop, centerCrop, " +
                  "colorFormat, flip, blur, threshold, gaussianKernel, normalize"
              )
          }
        } catch {
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
