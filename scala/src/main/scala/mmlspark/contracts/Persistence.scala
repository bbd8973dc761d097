package mmlspark.contracts

import scala.reflect.ClassTag
import scala.util.Try

import org.apache.hadoop.fs.Path
import org.apache.spark.ml.PipelineStage
import org.apache.spark.ml.mmlspark.ParamsIO
import org.apache.spark.ml.param.{Param, ParamMap, ParamPair, Params}
import org.apache.spark.ml.util.{MLReadable, MLReader, MLWritable, MLWriter}
import org.apache.spark.sql.SparkSession
import org.json4s.{JField, JObject}
import org.json4s.jackson.JsonMethods.parse

/** A param whose value is a pipeline stage (a meta-estimator's inner stage). It is saved as a stage
  * of its own under `params/<name>` next to the metadata, never as JSON, and it is the one kind of
  * param that cannot be set over Spark Connect.
  */
class StageParam(parent: Params, name: String, doc: String)
    extends Param[PipelineStage](parent, name, doc, (s: PipelineStage) => s != null) {

  override def jsonEncode(value: PipelineStage): String =
    throw new UnsupportedOperationException(
      s"param '$name' holds a stage and is saved as a directory, not as JSON"
    )

  override def jsonDecode(json: String): PipelineStage =
    throw new UnsupportedOperationException(
      s"param '$name' holds a stage and is loaded from a directory, not from JSON"
    )
}

/** A param whose value is several pipeline stages (a model selector's candidates): saved as stages
  * of their own under `params/<name>/<index>`, never as JSON, and not settable over Spark Connect.
  */
class StageArrayParam(parent: Params, name: String, doc: String)
    extends Param[Array[PipelineStage]](
      parent,
      name,
      doc,
      (s: Array[PipelineStage]) => s != null && s.nonEmpty && s.forall(_ != null)
    ) {

  override def jsonEncode(value: Array[PipelineStage]): String =
    throw new UnsupportedOperationException(
      s"param '$name' holds stages and is saved as directories, not as JSON"
    )

  override def jsonDecode(json: String): Array[PipelineStage] =
    throw new UnsupportedOperationException(
      s"param '$name' holds stages and is loaded from directories, not from JSON"
    )
}

object StageParams {

  /** Gives `copied`, a copy of `from` made with `copyValues`, copies of its own of the stages in
    * `from`'s stage-valued params (`copyValues` shares them between the copy and the original).
    */
  def copyStages[T <: Params](from: Params, copied: T, extra: ParamMap): T = {
    from.params.foreach {
      case p: StageParam => from.get(p).foreach(s => copied.set(p, s.copy(extra)))
      case p: StageArrayParam => from.get(p).foreach(s => copied.set(p, s.map(_.copy(extra))))
      case _ =>
    }
    copied
  }
}

/** Save for mmlspark stages: Spark's metadata layout (so `Pipeline` save/load and Spark's readers
  * see nothing unusual), stage-valued params in sub-directories, and whatever data a stage holds
  * beyond its params written by `saveData` as plain files next to the metadata.
  */
trait StageWritable extends MLWritable { self: Params =>

  /** Writes what the stage holds beyond its params (tables, binary payloads) under `path`. */
  def saveData(path: String, spark: SparkSession): Unit = ()

  override def write: MLWriter = new StageWriter(this)
}

private[contracts] object StagePersistence {
  def stageParamDir(path: String, param: Param[_]): String =
    new Path(new Path(path, "params"), param.name).toString
}

final class StageWriter(instance: Params with StageWritable) extends MLWriter {

  override protected def saveImpl(path: String): Unit = {
    val set = instance.params.flatMap(p =>
      instance.get(p).map(v => ParamPair(p.asInstanceOf[Param[Any]], v))
    )
    val (stages, plain) =
      set.partition(p => p.param.isInstanceOf[StageParam] || p.param.isInstanceOf[StageArrayParam])
    val json = JObject(
      plain.map(pair => JField(pair.param.name, parse(pair.param.jsonEncode(pair.value)))).toList
    )
    ParamsIO.saveMetadata(instance, path, sparkSession, json)
    def save(value: Any, dir: String, name: String): Unit = value match {
      case writable: MLWritable => writable.write.save(dir)
      case other =>
        throw new UnsupportedOperationException(
          s"${SchemaUtils.stageName(instance)}: param '$name' holds " +
            s"${other.getClass.getName}, which cannot be saved (it is not MLWritable)"
        )
    }
    stages.foreach { pair =>
      val dir = StagePersistence.stageParamDir(path, pair.param)
      pair.value match {
        case many: Array[_] =>
          many.zipWithIndex.foreach { case (v, i) =>
            save(v, new Path(dir, i.toString).toString, pair.param.name)
          }
        case one => save(one, dir, pair.param.name)
      }
    }
    instance.saveData(path, sparkSession)
  }
}

/** Load for stages written by [[StageWritable]]. A companion object extends this. */
abstract class StageReadable[T <: Params: ClassTag] extends MLReadable[T] {

  /** Creates the instance for `uid`, reading any data `saveData` wrote under `path`. */
  protected def create(uid: String, path: String, spark: SparkSession): T =
    implicitly[ClassTag[T]].runtimeClass
      .getConstructor(classOf[String])
      .newInstance(uid)
      .asInstanceOf[T]

  /** Called once a loaded instance has its saved params, with their names: a stage that gained a
    * param whose default changes what it does sets the value that keeps stages saved before it
    * doing what they did.
    */
  protected def loaded(instance: T, savedParams: Set[String]): Unit = ()

  override def read: MLReader[T] = new MLReader[T] {
    override def load(path: String): T = {
      val cls = implicitly[ClassTag[T]].runtimeClass
      val any = ParamsIO.loadMetadata(path, sparkSession, "")
      val saved =
        if (any.className == cls.getName || MovedStage.isFormerName(any.className, cls)) any
        else ParamsIO.loadMetadata(path, sparkSession, cls.getName) // fails, saying why
      val instance = create(saved.uid, path, sparkSession)
      saved.setOn(instance)
      loaded(instance, saved.names)
      val fs = new Path(path).getFileSystem(sparkSession.sparkContext.hadoopConfiguration)
      instance.params.foreach {
        case p: StageParam =>
          val dir = StagePersistence.stageParamDir(path, p)
          if (fs.exists(new Path(dir)))
            instance.set(p, ParamsIO.loadStage[PipelineStage](dir, sparkSession))
        case p: StageArrayParam =>
          val dir = new Path(StagePersistence.stageParamDir(path, p))
          if (fs.exists(dir)) {
            val count = fs.listStatus(dir).count(_.isDirectory)
            instance.set(
              p,
              Array.tabulate(count)(i =>
                ParamsIO.loadStage[PipelineStage](new Path(dir, i.toString).toString, sparkSession)
              )
            )
          }
        case _ =>
      }
      instance
    }
  }

  // Defined here so Java (and py4j) callers get a static `load` on the companion class.
  override def load(path: String): T = super.load(path)
}

/** What a stage leaves under its former class name when it moves to another package: an object of
  * that name (`object ImageFeaturizer extends MovedStage(mmlspark.onnx.ImageFeaturizer)` in the old
  * package). Spark's `PipelineModel.load` finds a saved stage's reader by the class name in its
  * metadata, so the object's static `read` loads stages saved under the old name, as the new class;
  * the new class's own `load` accepts them too. Codegen re-exports the stage from the old Python
  * area and writes the old name into the wrapper, for Python's loaders.
  */
abstract class MovedStage[T <: Params](now: StageReadable[T])(implicit tag: ClassTag[T])
    extends MLReadable[T] {

  /** The class the stage is now. */
  def movedTo: Class[_] = tag.runtimeClass

  override def read: MLReader[T] = now.read

  // Defined here so Java (and py4j) callers get a static `load` on the old name's class.
  override def load(path: String): T = now.load(path)
}

object MovedStage {

  /** The `MovedStage` object named `className`, if there is one. */
  def named(className: String, loader: ClassLoader): Option[MovedStage[_]] =
    Try(Class.forName(className + "$", true, loader).getField("MODULE$").get(null)).toOption
      .collect { case moved: MovedStage[_] => moved }

  /** Whether `saved`, a class name read from saved metadata, is a former name of `cls`. */
  def isFormerName(saved: String, cls: Class[_]): Boolean =
    named(saved, cls.getClassLoader).exists(_.movedTo == cls)
}
