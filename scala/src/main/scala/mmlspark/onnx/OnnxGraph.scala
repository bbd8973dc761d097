package mmlspark.onnx

import java.io.ByteArrayOutputStream
import java.nio.charset.StandardCharsets.UTF_8

import scala.collection.mutable

/** Graph surgery on ONNX model bytes: cutting a model at an intermediate tensor, so that the part
  * computing it becomes a model of its own (the headless featurizer of transfer learning).
  *
  * The model is edited at the protobuf wire level with the field numbers of `onnx.proto`; every
  * field the edit does not touch (opsets, metadata, attributes, weights) is copied byte for byte,
  * so nothing is lost to a schema this code does not know.
  */
object OnnxGraph {

  // Field numbers from onnx.proto.
  private val ModelGraph = 7
  private val ModelFunctions = 25
  private val FunctionNode = 7
  private object Graph {
    val Node = 1; val Initializer = 5; val Input = 11; val Output = 12; val ValueInfo = 13
    val SparseInitializer = 15
  }
  private object Node { val Input = 1; val Output = 2; val Name = 3; val Attribute = 5 }
  private object Attribute {
    val T = 5; val G = 6; val Tensors = 10; val Graphs = 11; val SparseTensor = 22
    val SparseTensors = 23
  }
  private object Tensor { val ExternalData = 13; val DataLocation = 14 }
  private val TensorName = 8
  private val ValueInfoName = 1

  /** One field of a message: its number, wire type, and (for length-delimited fields) payload;
    * `raw` is the whole encoded field, key included, for verbatim copies.
    */
  private final case class Field(
      number: Int,
      wireType: Int,
      payload: Array[Byte],
      raw: Array[Byte]
  ) {
    def string: String = new String(payload, UTF_8)
  }

  private final class Reader(bytes: Array[Byte]) {
    var pos = 0
    def varint(): Long = {
      var result = 0L
      var shift = 0
      var b = 0
      while ({
        if (pos >= bytes.length) throw new IllegalArgumentException("truncated ONNX model (varint)")
        b = bytes(pos) & 0xff
        pos += 1
        result |= (b & 0x7fL) << shift
        shift += 7
        (b & 0x80) != 0
      }) {}
      result
    }
  }

  private def fields(bytes: Array[Byte]): Seq[Field] = {
    val in = new Reader(bytes)
    val out = mutable.ArrayBuffer[Field]()
    while (in.pos < bytes.length) {
      val start = in.pos
      val key = in.varint()
      val (number, wireType) = ((key >>> 3).toInt, (key & 7).toInt)
      val payload = wireType match {
        case 0 => in.varint(); null
        case 1 => in.pos += 8; null
        case 5 => in.pos += 4; null
        case 2 =>
          val length = in.varint().toInt
          if (length < 0 || in.pos + length > bytes.length)
            throw new IllegalArgumentException("truncated ONNX model (length-delimited field)")
          val p = java.util.Arrays.copyOfRange(bytes, in.pos, in.pos + length)
          in.pos += length
          p
        case other => throw new IllegalArgumentException(s"not an ONNX model (wire type $other)")
      }
      if (in.pos > bytes.length) throw new IllegalArgumentException("truncated ONNX model")
      out += Field(number, wireType, payload, java.util.Arrays.copyOfRange(bytes, start, in.pos))
    }
    out.toSeq
  }

  private def writeVarint(out: ByteArrayOutputStream, value: Long): Unit = {
    var v = value
    while ((v & ~0x7fL) != 0) {
      out.write(((v & 0x7f) | 0x80).toInt)
      v >>>= 7
    }
    out.write(v.toInt)
  }

  private def lengthDelimited(number: Int, payload: Array[Byte]): Array[Byte] = {
    val out = new ByteArrayOutputStream()
    writeVarint(out, (number.toLong << 3) | 2)
    writeVarint(out, payload.length)
    out.write(payload)
    out.toByteArray
  }

  private def strings(message: Array[Byte], number: Int): Seq[String] =
    fields(message).filter(f => f.number == number && f.wireType == 2).map(_.string)

  private final case class NodeInfo(
      field: Field,
      name: String,
      inputs: Seq[String],
      outputs: Seq[String]
  )

  /** A node's inputs, plus the outer names its subgraphs (If, Loop, Scan bodies) read. */
  private def nodeInfo(field: Field): NodeInfo = {
    val parts = fields(field.payload)
    def subgraphInputs(graph: Array[Byte]): Seq[String] =
      fields(graph).filter(_.number == Graph.Node).flatMap(n => nodeInfo(n).inputs)
    val fromSubgraphs = parts.filter(_.number == Node.Attribute).flatMap { a =>
      fields(a.payload)
        .filter(f => (f.number == Attribute.G || f.number == Attribute.Graphs) && f.wireType == 2)
        .flatMap(g => subgraphInputs(g.payload))
    }
    NodeInfo(
      field,
      parts.find(_.number == Node.Name).map(_.string).getOrElse(""),
      parts.filter(_.number == Node.Input).map(_.string) ++ fromSubgraphs,
      parts.filter(_.number == Node.Output).map(_.string)
    )
  }

  /** The tensor names a node or tensor name stands for. */
  private def resolve(name: String, nodes: Seq[NodeInfo]): String =
    if (nodes.exists(_.outputs.contains(name))) name
    else
      nodes.find(_.name == name) match {
        case Some(node) if node.outputs.length == 1 => node.outputs.head
        case Some(node) =>
          throw new IllegalArgumentException(
            s"node '$name' has ${node.outputs.length} outputs (${node.outputs.mkString(", ")}); name one of them"
          )
        case None =>
          val known = nodes.flatMap(n => if (n.name.nonEmpty) Seq(n.name) else Nil) ++ nodes
            .flatMap(_.outputs)
          throw new IllegalArgumentException(
            s"the model has no node or tensor '$name'; it has ${known.distinct.take(40).mkString(", ")}" +
              (if (known.distinct.length > 40) ", ..." else "")
          )
      }

  /** A model names an external data file outside its own directory. */
  final class ExternalDataOutside(message: String) extends IllegalArgumentException(message)

  /** The files a model keeps tensor data in (its external data), as the relative locations the
    * model names, in first-use order. Every tensor is looked at: initializers (dense and sparse),
    * tensor attributes and those of subgraphs and functions. The model is read in place (a byte
    * array, or a memory-mapped file) and large weights are skipped over, never copied. Fails for a
    * location outside the model's directory (absolute, or with a `..` step), which no save could
    * carry along.
    */
  def externalDataLocations(model: java.nio.ByteBuffer): Seq[String] = {
    val found = mutable.LinkedHashSet[String]()
    val limit = model.limit()
    // The varint at `at`, and the position after it.
    def varint(at: Int, end: Int): (Long, Int) = {
      var pos = at
      var result = 0L
      var shift = 0
      var b = 0
      while ({
        if (pos >= end || shift > 63)
          throw new IllegalArgumentException("truncated ONNX model (varint)")
        b = model.get(pos) & 0xff
        pos += 1
        result |= (b & 0x7fL) << shift
        shift += 7
        (b & 0x80) != 0
      }) {}
      (result, pos)
    }
    // Calls `f(number, wireType, start, end)` for each field of the message in [start, end): for a
    // varint, its bounds; for a length-delimited field, its payload's.
    def scan(start: Int, end: Int)(f: (Int, Int, Int, Int) => Unit): Unit = {
      var pos = start
      while (pos < end) {
        val (key, afterKey) = varint(pos, end)
        val (number, wireType) = ((key >>> 3).toInt, (key & 7).toInt)
        pos = wireType match {
          case 0 =>
            val after = varint(afterKey, end)._2
            f(number, 0, afterKey, after)
            after
          case 1 => afterKey + 8
          case 5 => afterKey + 4
          case 2 =>
            val (length, at) = varint(afterKey, end)
            if (length < 0 || at + length > end)
              throw new IllegalArgumentException("truncated ONNX model (length-delimited field)")
            f(number, 2, at, at + length.toInt)
            at + length.toInt
          case other => throw new IllegalArgumentException(s"not an ONNX model (wire type $other)")
        }
        if (pos > end) throw new IllegalArgumentException("truncated ONNX model")
      }
    }
    def text(start: Int, end: Int): String = {
      val bytes = new Array[Byte](end - start)
      model.duplicate().position(start).get(bytes)
      new String(bytes, UTF_8)
    }
    def tensor(start: Int, end: Int): Unit = {
      var external = false
      var location: Option[String] = None
      scan(start, end) {
        case (Tensor.DataLocation, 0, at, e) => external = varint(at, e)._1 == 1L
        case (Tensor.ExternalData, 2, s, e) =>
          var key = ""
          var value = ""
          scan(s, e) {
            case (1, 2, ks, ke) => key = text(ks, ke)
            case (2, 2, vs, ve) => value = text(vs, ve)
            case _ =>
          }
          if (key == "location") location = Some(value)
        case _ =>
      }
      if (external) location.foreach { l =>
        val steps = l.split("[/\\\\]")
        if (l.isEmpty || l.startsWith("/") || l.contains(":") || steps.contains(".."))
          throw new ExternalDataOutside(
            s"the model keeps tensor data in '$l', which is not a file in the model's directory"
          )
        found += l
      }
    }
    def sparseTensor(start: Int, end: Int): Unit = scan(start, end) {
      case (1 | 2, 2, s, e) => tensor(s, e) // values, indices
      case _ =>
    }
    def node(start: Int, end: Int): Unit = scan(start, end) {
      case (Node.Attribute, 2, s, e) =>
        scan(s, e) {
          case (Attribute.T | Attribute.Tensors, 2, ts, te) => tensor(ts, te)
          case (Attribute.G | Attribute.Graphs, 2, gs, ge) => graph(gs, ge)
          case (Attribute.SparseTensor | Attribute.SparseTensors, 2, ts, te) =>
            sparseTensor(ts, te)
          case _ =>
        }
      case _ =>
    }
    def graph(start: Int, end: Int): Unit = scan(start, end) {
      case (Graph.Node, 2, s, e) => node(s, e)
      case (Graph.Initializer, 2, s, e) => tensor(s, e)
      case (Graph.SparseInitializer, 2, s, e) => sparseTensor(s, e)
      case _ =>
    }
    scan(0, limit) {
      case (ModelGraph, 2, s, e) => graph(s, e)
      case (ModelFunctions, 2, s, e) =>
        scan(s, e) {
          case (FunctionNode, 2, ns, ne) => node(ns, ne)
          case _ =>
        }
      case _ =>
    }
    found.toSeq
  }

  def externalDataLocations(model: Array[Byte]): Seq[String] =
    externalDataLocations(java.nio.ByteBuffer.wrap(model))

  /** The external data files of the model file at `path` (read memory-mapped). */
  def externalDataLocations(path: java.nio.file.Path): Seq[String] = {
    val channel = java.nio.channels.FileChannel.open(path)
    try {
      if (channel.size() > Int.MaxValue)
        throw new IllegalArgumentException(
          s"'$path' is ${channel.size()} bytes; an ONNX model file is at most 2 GiB"
        )
      externalDataLocations(
        channel.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, 0, channel.size())
      )
    } finally channel.close()
  }

  /** The tensor names of the graph's nodes' outputs, in graph order. */
  def tensorNames(model: Array[Byte]): Seq[String] = graphOf(model)._2.flatMap(_.outputs)

  private def graphOf(model: Array[Byte]): (Seq[Field], Seq[NodeInfo]) = {
    val graph = fields(model).find(f => f.number == ModelGraph && f.wireType == 2).getOrElse {
      throw new IllegalArgumentException("not an ONNX model: it has no graph")
    }
    val graphFields = fields(graph.payload)
    (graphFields, graphFields.filter(_.number == Graph.Node).map(nodeInfo))
  }

  /** The model that computes only `targets` (tensor or node names) from the inputs they need: the
    * nodes, initializers and inputs no target depends on are dropped, and the targets become the
    * graph's outputs.
    */
  def cut(model: Array[Byte], targets: Seq[String]): Array[Byte] = {
    val (graphFields, nodes) = graphOf(model)
    val wanted = targets.map(resolve(_, nodes))
    val needed = mutable.Set[String](wanted: _*)
    val kept = mutable.Set[Field]()
    nodes.reverseIterator.foreach { node =>
      if (node.outputs.exists(needed.contains)) {
        kept += node.field
        needed ++= node.inputs.filter(_.nonEmpty)
      }
    }
    def named(f: Field, number: Int): String = strings(f.payload, number).headOption.getOrElse("")
    // A typed declaration of a target, if the model has one (as an output or in value_info).
    val declared = graphFields
      .filter(f => f.number == Graph.Output || f.number == Graph.ValueInfo)
      .map(f => named(f, ValueInfoName) -> f.payload)
      .toMap
    val out = new ByteArrayOutputStream()
    var outputsWritten = false
    graphFields.foreach { f =>
      f.number match {
        case Graph.Node => if (kept.contains(f)) out.write(f.raw)
        case Graph.Initializer => if (needed.contains(named(f, TensorName))) out.write(f.raw)
        case Graph.Input | Graph.ValueInfo =>
          if (needed.contains(named(f, ValueInfoName))) out.write(f.raw)
        case Graph.Output =>
          if (!outputsWritten) {
            wanted.foreach { name =>
              val info =
                declared.getOrElse(name, lengthDelimited(ValueInfoName, name.getBytes(UTF_8)))
              out.write(lengthDelimited(Graph.Output, info))
            }
            outputsWritten = true
          }
        case _ => out.write(f.raw)
      }
    }
    if (!outputsWritten)
      wanted.foreach { name =>
        out.write(
          lengthDelimited(Graph.Output, lengthDelimited(ValueInfoName, name.getBytes(UTF_8)))
        )
      }
    val result = new ByteArrayOutputStream()
    fields(model).foreach { f =>
      if (f.number == ModelGraph && f.wireType == 2)
        result.write(lengthDelimited(ModelGraph, out.toByteArray))
      else result.write(f.raw)
    }
    result.toByteArray
  }
}
