package mmlspark.explainers

import java.util.concurrent.ConcurrentHashMap

import mmlspark.opencv.{
  CenterCrop,
  Crop,
  Flip,
  ImageOp,
  ImageTransformer,
  Letterbox,
  Resize,
  ResizeShorter
}
import mmlspark.pixels.{Exif, ImageCodec, ImageHeader, ImageSchemaUtils, ImageStruct, OpenCV}
import org.apache.spark.ml.{PipelineModel, Transformer}
import org.apache.spark.ml.param.ParamMap
import org.apache.spark.sql.{DataFrame, Encoders, Row}
import org.apache.spark.sql.functions._
import org.apache.spark.sql.types._
import org.opencv.core.MatOfByte
import org.opencv.imgcodecs.Imgcodecs

/** An image's superpixels: the size of the image they were computed on (the model-size image), and
  * each pixel's superpixel index, row by row; then where that image lies in the explained image
  * (the source: the image in inputCol at full resolution, of `sourceHeight` x `sourceWidth`).
  * `transform` is `[ax, bx, ay, by]`: a point of the source (x, y) in pixel-edge coordinates (pixel
  * i spans [i, i + 1)) lies at (ax x + bx, ay y + by) in the model-size image; a flip gives a
  * negative scale. The three are null where the source's size is unknown (encoded bytes whose
  * header this library cannot read).
  */
final case class SuperpixelData(
    height: Int,
    width: Int,
    labels: Array[Int],
    sourceHeight: Option[Int] = None,
    sourceWidth: Option[Int] = None,
    transform: Array[Double] = null
)

/** The image explainers' plan (ImageLIME, ImageSHAP), for every row at once. Each image is decoded
  * and brought to the model's size once: when the model (or its PipelineModel's first stage) is an
  * ImageTransformer reading inputCol, its leading geometric operations (resize, crop, letterbox,
  * flip) run once per image, and its other operations (normalize, the tensor) on each sample; else
  * the image is decoded once at its own size. Its superpixels are computed once, on that image;
  * each sample is that image with some superpixels black, scored through the rest of the model in
  * one transform; each (row, class)'s samples are fitted on the executors.
  */
private[explainers] object ImageExplaining {

  import Explaining.{col, Id, Sample}

  val Img: String = Explaining.Prefix + "image"
  val ImgError: String = Explaining.Prefix + "imageError"
  val Sp: String = Explaining.Prefix + "superpixels"
  val Count: String = Explaining.Prefix + "count"
  val Samples: String = Explaining.Prefix + "samples"

  lazy val superpixelType: StructType = Encoders.product[SuperpixelData].schema

  /** How the samples are drawn and fitted. */
  sealed trait Kind {

    /** How many samples an image of `count` superpixels has. */
    def samples(count: Int): Int

    /** The 0/1 mask over `count` superpixels of sample `s`. */
    def mask(count: Int, s: Int): Array[Double]

    /** The coefficients and r2 of a row and class, `ys(s)` the score of sample s. */
    def fit(count: Int, ys: Array[Double]): (Seq[Double], Double)
  }

  final case class Lime(drawn: Int, fraction: Double, width: Option[Double], lambda: Double)
      extends Kind {
    def samples(count: Int): Int = drawn

    def mask(count: Int, s: Int): Array[Double] =
      Superpixels.limeMask(count, s, fraction, Explaining.Seed)

    def fit(count: Int, ys: Array[Double]): (Seq[Double], Double) = {
      val x = Array.tabulate(drawn)(mask(count, _))
      val kernel = width.getOrElse(0.75 * math.sqrt(count.toDouble))
      val w = x.map { m =>
        val d2 = m.map(v => (1.0 - v) * (1.0 - v)).sum
        math.sqrt(math.exp(-d2 / (kernel * kernel)))
      }
      val fit = LocalFits.ridge(x, ys, w, lambda)
      (fit.coefficients.toSeq, fit.r2)
    }
  }

  final case class Shap(samples: Option[Int]) extends Kind {
    def coalitions(count: Int): KernelShap.Coalitions =
      ImageExplaining.coalitions.computeIfAbsent(
        (count, samples.getOrElse(KernelShap.defaultSamples(count))),
        key => KernelShap.coalitions(key._1, key._2, Explaining.Seed)
      )

    def samples(count: Int): Int = coalitions(count).masks.length

    def mask(count: Int, s: Int): Array[Double] = coalitions(count).masks(s)

    def fit(count: Int, ys: Array[Double]): (Seq[Double], Double) = {
      val fit = KernelShap.explain(coalitions(count), ys)
      (fit.coefficients.toSeq, fit.r2)
    }
  }

  /** The coalitions per (superpixels, samples), made once per JVM (they are the same for every
    * image of as many superpixels).
    */
  private val coalitions = new ConcurrentHashMap[(Int, Int), KernelShap.Coalitions]()

  private def geometric(op: ImageOp): Boolean = op match {
    case _: Resize | _: ResizeShorter | _: Crop | _: CenterCrop | _: Letterbox | _: Flip => true
    case _ => false
  }

  /** The stage that brings each image to the size the model sees, once, and its operations; the
    * model's stages that score the samples; and whether a sample is written back as PNG bytes (the
    * model reads encoded bytes at inputCol).
    */
  private def split(
      stage: ImageExplainerParams,
      model: Transformer,
      schema: StructType
  ): (ImageTransformer, Seq[ImageOp], Seq[Transformer], String, Boolean) = {
    val stages = model match {
      case p: PipelineModel => p.stages.toSeq
      case t => Seq(t)
    }
    val sizing =
      new ImageTransformer().setInputCol(stage.getInputCol).setOutputCol(Img).setErrorCol(ImgError)
    stages.headOption match {
      case Some(t: ImageTransformer) if t.getInputCol == stage.getInputCol =>
        val (before, after) = t.getOps.span(geometric)
        sizing.setOperations(ImageOp.toJson(before))
        sizing.setReducedDecode(t.getReducedDecode)
        val rest = t.copy(ParamMap.empty).setInputCol(Img).setOperations(ImageOp.toJson(after))
        (sizing, before, rest +: stages.tail, Img, false)
      case _ =>
        val encode = schema(stage.getInputCol).dataType == BinaryType
        (sizing, Nil, stages, stage.getInputCol, encode)
    }
  }

  /** The superpixels of an image struct (null for an image not of 8-bit samples). Marked
    * nondeterministic so that the optimizer computes it once per image: never copied into the
    * filter and the columns that read it.
    */
  private val segment = udf { (image: Row, cellSize: Double, modifier: Double) =>
    val mode = image.getAs[Int]("mode")
    if ((mode & 7) != 0) null // 8-bit images only (the sizing stage's are)
    else {
      val (h, w) = (image.getAs[Int]("height"), image.getAs[Int]("width"))
      val labels = Superpixels.slic(
        image.getAs[Array[Byte]]("data"),
        h,
        w,
        image.getAs[Int]("nChannels"),
        cellSize,
        modifier
      )
      SuperpixelData(h, w, labels)
    }
  }.asNondeterministic()

  /** The (height, width) of the image encoded in `bytes` as it is decoded (a JPEG's EXIF
    * orientation applied), from its header; None for a format whose header is not read.
    */
  private def encodedSize(bytes: Array[Byte]): Option[(Int, Int)] =
    if (bytes == null) None
    else
      ImageHeader.read(bytes).map { h =>
        val orientation = if (ImageCodec.isJpeg(bytes)) Exif.orientation(bytes) else 1
        if (orientation >= 5) (h.width, h.height) else (h.height, h.width)
      }

  /** The superpixels `sp` with where their image lies in the source, of `size` (None: unknown).
    * Without leading geometric operations the model-size image is the source itself.
    */
  private def located(ops: Seq[ImageOp])(sp: Row, size: => Option[(Int, Int)]): SuperpixelData =
    if (sp == null) null
    else {
      val (h, w) = (sp.getAs[Int]("height"), sp.getAs[Int]("width"))
      val labels = sp.getAs[Seq[Int]]("labels").toArray
      val source = if (ops.isEmpty) Some((h, w)) else size
      source match {
        case Some((sh, sw)) =>
          SuperpixelData(h, w, labels, Some(sh), Some(sw), Superpixels.view(ops, sh, sw))
        case None => SuperpixelData(h, w, labels)
      }
    }

  private def perturbed(image: Row, labels: Seq[Int], mask: Array[Double]): ImageStruct = {
    val data =
      Superpixels.perturb(image.getAs[Array[Byte]]("data"), labels.toArray, mask)
    ImageStruct(
      image.getAs[String]("origin"),
      image.getAs[Int]("height"),
      image.getAs[Int]("width"),
      image.getAs[Int]("nChannels"),
      image.getAs[Int]("mode"),
      data
    )
  }

  private def png(image: ImageStruct): Array[Byte] = {
    OpenCV.ensureLoaded()
    val mat = ImageSchemaUtils.toMat(
      Row(image.origin, image.height, image.width, image.nChannels, image.mode, image.data)
    )
    val buffer = new MatOfByte()
    try {
      Imgcodecs.imencode(".png", mat, buffer)
      buffer.toArray
    } finally {
      buffer.release()
      mat.release()
    }
  }

  /** The explanations of every row of `data`: outputCol, metricsCol and superpixelCol (null where
    * the image is null or cannot be read).
    */
  def explain(stage: ImageExplainerParams, data: DataFrame, kind: Kind): DataFrame = {
    val model = stage.explainedModel
    val (sizing, view, scoring, target, encode) = split(stage, model, data.schema)
    val input = Explaining.indexed(stage, data)
    val sampleCount = udf((count: Int) => kind.samples(count))
    val segmented = sizing
      .transform(input)
      .withColumn(Sp, segment(col(Img), lit(stage.getCellSize), lit(stage.getModifier)))
      .filter(col(Sp).isNotNull)
      .withColumn(Count, array_max(col(Sp)("labels")) + 1)
    val samples = segmented
      .withColumn(Sample, explode(sequence(lit(0), sampleCount(col(Count)) - 1)))
    val perturb = if (encode) {
      udf { (image: Row, labels: Seq[Int], count: Int, s: Int) =>
        png(perturbed(image, labels, kind.mask(count, s)))
      }
    } else {
      udf { (image: Row, labels: Seq[Int], count: Int, s: Int) =>
        perturbed(image, labels, kind.mask(count, s))
      }
    }
    val inputs = samples
      .withColumn(target, perturb(col(Img), col(Sp)("labels"), col(Count), col(Sample)))
      // each sample holds its model-size image only: not the photo (in inputCol, read once)
      .drop((if (target == Img) Seq(ImgError, stage.getInputCol) else Seq(Img, ImgError)): _*)
    val scored = scoring.foldLeft(inputs)((df, t) => t.transform(df))
    val keep = Seq(col(Id), col(Sample), col(Sp), col(Count))
    val values = scored
      .select(keep :+ Explaining.targets(stage, scored).as("t"): _*)
      .select(keep :+ posexplode(col("t")).as(Seq("k", "y")): _*)
    val solve = udf { (count: Int, rows: Seq[Row]) =>
      val ys = new Array[Double](kind.samples(count))
      rows.foreach(r => ys(r.getInt(0)) = r.getDouble(1))
      kind.fit(count, ys)
    }
    val fits = values
      .groupBy(col(Id), col("k"))
      .agg(
        first(col(Sp)).as(Sp),
        first(col(Count)).as(Count),
        collect_list(struct(col(Sample), col("y"))).as(Samples)
      )
      .select(
        col(Id),
        col("k"),
        col(Sp),
        solve(col(Count), col(Samples)).as("fit")
      )
      .select(
        col(Id),
        col("k"),
        col(Sp),
        col("fit").getField("_1").as("coefficients"),
        col("fit").getField("_2").as("r2")
      )
    // where the superpixels lie in the photo: read after the join, from the photo the output holds
    // anyway (a file read_images defers is not decoded a second time for its size)
    val locate = data.schema(stage.getInputCol).dataType match {
      case BinaryType =>
        val f = udf((sp: Row, bytes: Array[Byte]) => located(view)(sp, encodedSize(bytes)))
        f(col(Sp), col(stage.getInputCol))
      case _ =>
        val f = udf((sp: Row, h: Int, w: Int) => located(view)(sp, Some((h, w))))
        f(col(Sp), col(stage.getInputCol)("height"), col(stage.getInputCol)("width"))
    }
    Explaining
      .output(stage, input, fits, Seq(Sp))
      .withColumn(Sp, locate)
      .withColumnRenamed(Sp, stage.getSuperpixelCol)
  }
}
