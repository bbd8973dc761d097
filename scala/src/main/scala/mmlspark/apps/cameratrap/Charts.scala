package mmlspark.apps.cameratrap

import mmlspark.pixels.OpenCV
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.json4s.{DefaultFormats, JValue}
import org.json4s.jackson.JsonMethods.parse
import org.opencv.core.{CvType, Mat, MatOfByte, Point, Rect, Scalar, Size}
import org.opencv.imgcodecs.Imgcodecs
import org.opencv.imgproc.Imgproc

/** The camera-trap job's report pictures (`mmlspark/apps/camera_trap/job.py`, through py4j), drawn
  * with the OpenCV the library already loads, so that an installed wheel can write them without a
  * plotting package: a confusion matrix and a captioned grid of photos. Both take their data as
  * JSON (callable from Python as is) and write a PNG to a local path.
  */
object Charts {

  private implicit val formats: DefaultFormats.type = DefaultFormats
  private val font = Imgproc.FONT_HERSHEY_SIMPLEX
  private val white = new Scalar(255, 255, 255)
  private val black = new Scalar(0, 0, 0)
  private val red = new Scalar(40, 40, 230)

  private def text(img: Mat, s: String, x: Int, y: Int, scale: Double, colour: Scalar): Unit =
    Imgproc.putText(img, s, new Point(x, y), font, scale, colour, 1, Imgproc.LINE_AA)

  private def write(img: Mat, path: String): Unit =
    if (!Imgcodecs.imwrite(path, img))
      throw new IllegalArgumentException(s"cannot write the picture to '$path'")

  /** A confusion matrix: `{"labels": [...], "matrix": [[...]]}`, rows the true classes, columns the
    * predicted ones; each cell is shaded by its share of its row (dark blue = all) with its count.
    */
  def confusionMatrix(json: String, path: String): Unit = {
    OpenCV.ensureLoaded()
    val data = parse(json)
    val labels = (data \ "labels").extract[Seq[String]]
    val matrix = (data \ "matrix").extract[Seq[Seq[Long]]]
    require(
      matrix.length == labels.length && matrix.forall(_.length == labels.length),
      "matrix must be labels x labels"
    )
    val (cell, margin, top) = (70, 110, 40)
    val side = cell * labels.length + 10
    val img = new Mat(top + side, margin + side, CvType.CV_8UC3, white)
    try {
      text(img, "predicted", margin, 20, 0.5, black)
      text(img, "true", 4, 20, 0.5, black)
      labels.indices.foreach { i =>
        text(img, labels(i).take(10), margin + i * cell + 4, top - 4, 0.4, black)
        text(img, labels(i).take(12), 4, top + i * cell + cell / 2 + 5, 0.45, black)
        val total = math.max(1L, matrix(i).sum)
        labels.indices.foreach { j =>
          val share = matrix(i)(j).toDouble / total
          val shade = new Scalar(255, 255 - 200 * share, 255 - 230 * share) // white to dark blue
          val corner = new Point(margin + j * cell, top + i * cell)
          Imgproc.rectangle(
            img,
            new Rect(corner.x.toInt, corner.y.toInt, cell - 2, cell - 2),
            shade,
            -1
          )
          text(
            img,
            matrix(i)(j).toString,
            corner.x.toInt + 8,
            corner.y.toInt + cell / 2 + 5,
            0.6,
            if (share > 0.5) white else black
          )
        }
      }
      write(img, path)
    } finally img.release()
  }

  /** A grid of photos, `columns` wide, each `cell` pixels square with its caption below: `[{"path":
    * <any Hadoop path>, "caption": "...", "boxes": [{"bbox": [x, y, w, h], "label": "..."}]},
    * ...]`, boxes (optional) as fractions of the photo, drawn with their labels. Unreadable photos
    * show as grey.
    */
  def imageGrid(json: String, columns: Int, cell: Int, path: String): Unit = {
    OpenCV.ensureLoaded()
    val parsed = parse(json).extract[Seq[JValue]]
    val items = parsed.map(v => ((v \ "path").extract[String], (v \ "caption").extract[String]))
    val boxes = parsed.map { v =>
      (v \ "boxes").extractOpt[Seq[JValue]].getOrElse(Nil).map { b =>
        ((b \ "bbox").extract[Seq[Double]], (b \ "label").extractOpt[String].getOrElse(""))
      }
    }
    require(items.nonEmpty && columns > 0 && cell > 16, "nothing to draw")
    val rows = (items.length + columns - 1) / columns
    val captionHeight = 22
    val img = new Mat(rows * (cell + captionHeight), columns * cell, CvType.CV_8UC3, white)
    val conf = new Configuration()
    try {
      items.zipWithIndex.foreach { case ((photo, caption), k) =>
        val (x, y) = ((k % columns) * cell, (k / columns) * (cell + captionHeight))
        val tile = img.submat(new Rect(x, y, cell, cell))
        val decoded = scala.util
          .Try {
            val file = new Path(photo)
            val in = file.getFileSystem(conf).open(file)
            val bytes =
              try in.readAllBytes()
              finally in.close()
            val buffer = new MatOfByte(bytes: _*)
            try Imgcodecs.imdecode(buffer, Imgcodecs.IMREAD_COLOR)
            finally buffer.release()
          }
          .toOption
          .filter(!_.empty())
        decoded match {
          case Some(mat) =>
            try Imgproc.resize(mat, tile, new Size(cell, cell), 0, 0, Imgproc.INTER_AREA)
            finally mat.release()
          case None => tile.setTo(new Scalar(128, 128, 128))
        }
        boxes(k).foreach {
          case (Seq(bx, by, bw, bh), label) =>
            val (left, top) = ((bx * cell).toInt, (by * cell).toInt)
            val corner = new Point(left + bw * cell, top + bh * cell)
            Imgproc.rectangle(tile, new Point(left, top), corner, red, 2)
            text(tile, label.take(cell / 7), left + 3, math.max(top + 12, 12), 0.35, red)
          case _ => ()
        }
        tile.release()
        text(img, caption.take(cell / 7), x + 2, y + cell + 15, 0.4, black)
      }
      write(img, path)
    } finally img.release()
  }
}
