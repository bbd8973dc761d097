package mmlspark.image

import java.io.IOException
import java.nio.file.{FileSystemLoopException, Files, NoSuchFileException, Path => NioPath, Paths}
import java.nio.file.attribute.BasicFileAttributes
import java.sql.Timestamp

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.Using

import mmlspark.pixels.ImageFiles.reason
import org.apache.hadoop.fs.{FileStatus, FileSystem, GlobFilter, Path}
import org.apache.spark.sql.{DataFrame, Encoders, SparkSession}

/** One entry of a listing: a file to read, or something that could not be used and why. */
final case class ListedFile(
    path: String,
    length: Long,
    modificationTime: Timestamp,
    error: String
)

/** Lists the files under a path on the driver, so that everything a user points at gives exactly
  * one row (contract 3: an unreadable file is a row error, never a job failure):
  *   - every regular file once, under the first path it is reached by in name order (a photo
  *     reached through a second symbolic link or hard link is not listed again);
  *   - a broken symbolic link, a folder that cannot be listed or a symbolic link that loops back to
  *     a folder above it, once each, with the reason in `error`.
  *
  * Names starting with `.` or `_` are skipped, as Spark's file sources do (`.DS_Store`,
  * `_SUCCESS`). Local paths are walked with java.nio (links followed, loops detected by file key);
  * other filesystems through Hadoop's `FileSystem`.
  */
object FileListing {

  lazy val schema = Encoders.product[ListedFile].schema

  def list(
      spark: SparkSession,
      path: String,
      recursive: Boolean = true,
      pathGlobFilter: String = null
  ): Seq[ListedFile] = {
    val hadoopPath = new Path(path)
    val fs = hadoopPath.getFileSystem(spark.sessionState.newHadoopConf())
    val roots = Option(fs.globStatus(hadoopPath)).map(_.toSeq).getOrElse(Nil)
    require(roots.nonEmpty, s"read_images: nothing at '$path' (no such file or folder)")
    val nameFilter = Option(pathGlobFilter).map(new GlobFilter(_))
    val listing = new Listing(fs, recursive, nameFilter)
    roots.sortBy(_.getPath.toString).foreach(listing.visitRoot)
    listing.files.toSeq
  }

  def listDataFrame(
      spark: SparkSession,
      path: String,
      recursive: Boolean = true,
      pathGlobFilter: String = null
  ): DataFrame = {
    val files = list(spark, path, recursive, pathGlobFilter)
    // Partitions of about ImageReader.targetPartitionBytes, at least a few per core; the
    // listing's order (by path) is kept.
    val bytes = files.iterator.map(_.length).sum
    val slices = math.max(
      1L,
      math.min(
        files.size.toLong,
        math.max(
          spark.sparkContext.defaultParallelism * 4L,
          bytes / ImageReader.targetPartitionBytes + 1
        )
      )
    )
    import spark.implicits._
    spark.sparkContext.parallelize(files, Math.toIntExact(slices)).toDS().toDF()
  }

  private def hidden(name: String): Boolean = name.startsWith(".") || name.startsWith("_")

  private final class Listing(fs: FileSystem, recursive: Boolean, nameFilter: Option[GlobFilter]) {
    val files = mutable.ArrayBuffer.empty[ListedFile]
    private val local = fs.getScheme == "file"
    private val seenFiles = mutable.HashSet.empty[AnyRef]
    private val seenFolders = mutable.HashSet.empty[AnyRef]

    private def failed(path: Path, why: String): Unit =
      files += ListedFile(path.toString, 0L, null, why)

    private def wanted(path: Path): Boolean = nameFilter.forall(_.accept(path))

    def visitRoot(status: FileStatus): Unit =
      if (local) visitLocal(Paths.get(status.getPath.toUri), status.getPath, Set.empty, top = true)
      else visitHadoop(status, top = true)

    private def visitLocal(
        file: NioPath,
        path: Path,
        ancestors: Set[AnyRef],
        top: Boolean
    ): Unit = {
      val attributes =
        try Files.readAttributes(file, classOf[BasicFileAttributes]) // follows links
        catch {
          case _: NoSuchFileException if Files.isSymbolicLink(file) =>
            if (wanted(path)) {
              val target = scala.util.Try(Files.readSymbolicLink(file).toString).getOrElse("?")
              failed(path, s"broken symbolic link (its target '$target' does not exist)")
            }
            return
          case e: FileSystemLoopException =>
            failed(path, s"symbolic link loop: ${reason(e)}")
            return
          case e: IOException =>
            if (wanted(path)) failed(path, s"cannot read file attributes: ${reason(e)}")
            return
        }
      val key = Option(attributes.fileKey()).getOrElse(file.toRealPath())
      if (attributes.isDirectory) {
        if (!recursive && !top) return
        if (ancestors.contains(key)) {
          val target = scala.util.Try(file.toRealPath().toString).getOrElse("?")
          failed(
            path,
            s"symbolic link loop: leads back to '$target', a folder above it; not followed"
          )
        } else if (seenFolders.add(key)) {
          val children =
            try
              Using.resource(Files.newDirectoryStream(file))(_.asScala.toList) // strict: it closes
            catch {
              case e: IOException =>
                failed(path, s"cannot list folder: ${reason(e)}")
                return
            }
          children
            .map(_.getFileName.toString)
            .filterNot(hidden)
            .sorted
            .foreach(name =>
              visitLocal(file.resolve(name), new Path(path, name), ancestors + key, top = false)
            )
        }
      } else if (attributes.isRegularFile) {
        if (wanted(path) && seenFiles.add(key)) {
          val time = new Timestamp(attributes.lastModifiedTime().toMillis)
          files += ListedFile(path.toString, attributes.size(), time, null)
        }
      } else if (wanted(path)) failed(path, "not a regular file (a device, socket or pipe)")
    }

    private def visitHadoop(status: FileStatus, top: Boolean): Unit =
      if (status.isDirectory) {
        if (recursive || top) {
          val children =
            try fs.listStatus(status.getPath).toSeq
            catch {
              case e: IOException =>
                failed(status.getPath, s"cannot list folder: ${reason(e)}")
                return
            }
          children
            .filterNot(c => hidden(c.getPath.getName))
            .sortBy(_.getPath.getName)
            .foreach(visitHadoop(_, top = false))
        }
      } else if (wanted(status.getPath)) {
        val time = new Timestamp(status.getModificationTime)
        files += ListedFile(status.getPath.toString, status.getLen, time, null)
      }
  }
}
